package report

import "headroom.dev/headroom/model/catalog"

// ModelRow is one catalog model as `headroom models` lists it: the
// catalog entry and what its config reads to (the table's columns).
type ModelRow struct {
	catalog.Entry
	Params       int64  `json:"params"`
	Layers       int    `json:"layers"`
	Attention    string `json:"attention"`
	MaxPositions int    `json:"max_position_embeddings"`
}

// Models lists the embedded catalog, sorted by id; a config that does not
// parse (none does not) is left out rather than listed without its facts.
func Models() []ModelRow {
	var out []ModelRow
	for _, e := range catalog.Entries() {
		s, ok := catalog.Lookup(e.ID)
		if !ok {
			continue
		}
		out = append(out, ModelRow{Entry: e, Params: s.Params(), Layers: s.Layers, Attention: AttentionSummary(s), MaxPositions: s.MaxPositions})
	}
	return out
}
