// Package catalog is headroom's embedded list of popular open models. Each
// model is stored as the Hugging Face config.json its repository publishes
// (architecture keys), so a catalog model goes through the same parser
// (model.ParseConfig) as a config.json the user brings; the catalog adds the
// checkpoint's size where it is known.
//
// The data lives in catalog.json (one entry per model id) and configs/ (one
// file per distinct architecture). An instruct model and its base, or a
// fine-tune that keeps the architecture, point at the same file, so each
// fact is written once. Every entry says where its config values and its
// checkpoint size come from (config_source, checkpoint_source, notes).
//
// To add a model: copy the architecture keys of its config.json into
// configs/<org>--<name>.json (or reuse a sibling's file), add an entry to
// catalog.json, and run this package's tests, which parse every entry and
// compare its parameter count with the size its name states.
package catalog

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"headroom.dev/headroom/model"
	"headroom.dev/headroom/names"
)

//go:embed catalog.json configs/*.json
var embedded embed.FS

// indexFile and configDir name the catalog's parts inside its file system.
const (
	indexFile = "catalog.json"
	configDir = "configs"
)

// maxNameLen bounds the names Lookup and Suggest consider: no model id comes
// close, and it keeps edit distances cheap on hostile input.
const maxNameLen = 256

// Entry is one model of the catalog as catalog.json lists it.
type Entry struct {
	// ID is the Hugging Face repository id, e.g. "meta-llama/Llama-3.1-8B-Instruct".
	ID string `json:"id"`
	// Config is the file under configs/ holding the model's config.json.
	Config string `json:"config"`
	// Family groups releases that belong together ("llama-3.1", "qwen3-moe").
	Family string `json:"family"`
	// Aliases are other names the model is known by: ollama tags, KAITO
	// preset names, repositories it was renamed from. Matched case-insensitively.
	Aliases []string `json:"aliases,omitempty"`
	// CheckpointBytes is the size of the checkpoint's weight tensors, 0 when
	// not recorded (the planner then derives it from the architecture).
	CheckpointBytes int64 `json:"checkpoint_bytes,omitempty"`
	// Source says where CheckpointBytes comes from.
	Source string `json:"checkpoint_source,omitempty"`
	// ConfigSource says where the values in the config file come from.
	ConfigSource string `json:"config_source"`
	// Notes records caveats: keys left out, values of lower confidence,
	// measurements that corroborate the entry.
	Notes string `json:"notes,omitempty"`
}

// file is the layout of catalog.json.
type file struct {
	Models []Entry `json:"models"`
}

// index is the parsed catalog.json. It is built once and never modified.
type index struct {
	fsys    fs.FS
	entries []Entry          // sorted by ID
	byKey   map[string]int   // lowercased id or alias -> entry
	byName  map[string][]int // lowercased id without its org -> entries
	err     error            // problems found while building; the index holds the entries without them
}

// embeddedIndex builds the index of the embedded catalog on first use. The
// embedded files cannot change while the program runs, so one lazily built,
// read-only index serves every caller; the function value is the only
// package-level state and holds nothing mutable.
var embeddedIndex = sync.OnceValue(func() *index { return newIndex(embedded) })

// newIndex reads catalog.json from fsys. It never fails outright: entries
// that are malformed are left out and reported in index.err.
func newIndex(fsys fs.FS) *index {
	ix := &index{fsys: fsys, byKey: map[string]int{}, byName: map[string][]int{}}
	data, err := fs.ReadFile(fsys, indexFile)
	if err != nil {
		ix.err = fmt.Errorf("model catalog: %w", err)
		return ix
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		ix.err = fmt.Errorf("model catalog: %s is not valid: %w", indexFile, err)
		return ix
	}
	var errs []error
	seen := map[string]bool{}
	for _, e := range f.Models {
		if err := checkEntry(e); err != nil {
			errs = append(errs, err)
			continue
		}
		key := strings.ToLower(e.ID)
		if seen[key] {
			errs = append(errs, fmt.Errorf("model catalog: id %q is listed twice", e.ID))
			continue
		}
		seen[key] = true
		ix.entries = append(ix.entries, e)
	}
	sort.Slice(ix.entries, func(i, j int) bool { return ix.entries[i].ID < ix.entries[j].ID })
	for i, e := range ix.entries {
		ix.byKey[strings.ToLower(e.ID)] = i
		name := nameOf(strings.ToLower(e.ID))
		ix.byName[name] = append(ix.byName[name], i)
	}
	for i, e := range ix.entries {
		for _, a := range e.Aliases {
			key := strings.ToLower(a)
			if j, ok := ix.byKey[key]; ok {
				errs = append(errs, fmt.Errorf("model catalog: alias %q of %s is already taken by %s", a, e.ID, ix.entries[j].ID))
				continue
			}
			if js := ix.byName[key]; len(js) > 0 {
				if js[0] == i {
					errs = append(errs, fmt.Errorf("model catalog: alias %q of %s repeats its name", a, e.ID))
				} else {
					errs = append(errs, fmt.Errorf("model catalog: alias %q of %s is the name of %s", a, e.ID, ix.entries[js[0]].ID))
				}
				continue
			}
			ix.byKey[key] = i
		}
	}
	ix.err = errors.Join(errs...)
	return ix
}

// checkEntry reports what is missing from one catalog.json entry.
func checkEntry(e Entry) error {
	switch {
	case e.ID == "":
		return errors.New("model catalog: an entry has no id")
	case !repoID.MatchString(e.ID):
		return fmt.Errorf("model catalog: id %q is not of the form org/name", e.ID)
	case e.Config == "" || e.Config != path.Base(e.Config) || !strings.HasSuffix(e.Config, ".json"):
		return fmt.Errorf("model catalog: %s: config %q must name a .json file in %s/", e.ID, e.Config, configDir)
	case e.CheckpointBytes < 0:
		return fmt.Errorf("model catalog: %s: checkpoint_bytes is negative", e.ID)
	case e.CheckpointBytes > 0 && e.Source == "":
		return fmt.Errorf("model catalog: %s: checkpoint_bytes needs a checkpoint_source", e.ID)
	case e.ConfigSource == "":
		return fmt.Errorf("model catalog: %s: config_source is empty", e.ID)
	}
	for _, a := range e.Aliases {
		if a == "" || len(a) > maxNameLen || normalize(a) != strings.ToLower(a) {
			return fmt.Errorf("model catalog: %s: alias %q is empty, too long, or not in normal form (spaces, URL prefix, trailing slash)", e.ID, a)
		}
	}
	return nil
}

// repoID is the shape of a Hugging Face repository id. Organisations have no
// dots, so an id never starts like the "hf.co/" prefix normalize strips.
var repoID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$`)

// nameOf is the part of a lowercased id after its organisation.
func nameOf(id string) string {
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		return id[i+1:]
	}
	return id
}

// normalize turns what a user typed into a lookup key: lowercase, no
// surrounding space, no Hugging Face URL prefix, no trailing slash.
func normalize(name string) string {
	s := strings.ToLower(strings.TrimSpace(name))
	for _, p := range []string{"https://", "http://"} {
		s = strings.TrimPrefix(s, p)
	}
	for _, p := range []string{"huggingface.co/", "hf.co/"} {
		s = strings.TrimPrefix(s, p)
	}
	return strings.TrimSuffix(s, "/")
}

// find resolves a name to an entry: the id in any case, an alias, or the name
// without its organisation when only one entry has it.
func (ix *index) find(name string) (int, bool) {
	if len(name) > maxNameLen {
		return 0, false
	}
	key := normalize(name)
	if i, ok := ix.byKey[key]; ok {
		return i, true
	}
	if !strings.Contains(key, "/") {
		if js := ix.byName[key]; len(js) == 1 {
			return js[0], true
		}
	}
	return 0, false
}

// spec parses entry i's config into a Spec and adds what the catalog knows
// beyond the config.
func (ix *index) spec(i int) (model.Spec, error) {
	e := ix.entries[i]
	data, err := fs.ReadFile(ix.fsys, configDir+"/"+e.Config)
	if err != nil {
		return model.Spec{}, fmt.Errorf("model catalog: %s: %w", e.ID, err)
	}
	s, err := model.ParseConfig(data)
	if err != nil {
		return model.Spec{}, fmt.Errorf("model catalog: %s (%s): %w", e.ID, e.Config, err)
	}
	s.ID = e.ID
	if e.CheckpointBytes > 0 {
		s.CheckpointBytes = e.CheckpointBytes
		s.CheckpointSource = e.Source
	}
	return s, nil
}

// IDs lists the catalog's model ids, sorted.
func IDs() []string {
	ix := embeddedIndex()
	ids := make([]string, len(ix.entries))
	for i, e := range ix.entries {
		ids[i] = e.ID
	}
	return ids
}

// Entries lists the catalog's entries sorted by id. The slice and its
// aliases are copies the caller may keep or change.
func Entries() []Entry {
	ix := embeddedIndex()
	out := make([]Entry, len(ix.entries))
	for i, e := range ix.entries {
		e.Aliases = slices.Clone(e.Aliases)
		out[i] = e
	}
	return out
}

// Lookup returns the Spec of a catalog model. name may be the Hugging Face
// id in any letter case (optionally as a huggingface.co URL), an alias, or
// the id without its organisation ("Llama-3.1-8B-Instruct") when only one
// model has that name. Each call parses afresh, so the caller owns the Spec.
func Lookup(name string) (model.Spec, bool) {
	ix := embeddedIndex()
	i, ok := ix.find(name)
	if !ok {
		return model.Spec{}, false
	}
	s, err := ix.spec(i)
	if err != nil {
		return model.Spec{}, false
	}
	return s, true
}

// Suggest returns up to n catalog ids close to name, best first. Ids whose
// name, full id or an alias contains what was typed come first, then by edit
// distance on lowercased names (ties go to the longer common prefix). Ids
// that differ in more than half of the typed characters are left out, so an
// unrelated name gets no suggestions.
func Suggest(name string, n int) []string {
	return embeddedIndex().suggest(name, n)
}

func (ix *index) suggest(name string, n int) []string {
	q := normalize(name)
	if n <= 0 || q == "" || len(q) > maxNameLen {
		return nil
	}
	type cand struct {
		id     string
		sub    bool
		dist   int
		prefix int // longest common prefix with a key: "deepseek-v3-0324" is nearer DeepSeek-V3 than an equally distant R1
	}
	limit := max(2, utf8.RuneCountInString(q)/2)
	var cs []cand
	for _, e := range ix.entries {
		id := strings.ToLower(e.ID)
		keys := append([]string{id, nameOf(id)}, e.Aliases...)
		c := cand{id: e.ID, dist: -1}
		for _, k := range keys {
			k = strings.ToLower(k)
			if len(q) >= 3 && strings.Contains(k, q) {
				c.sub = true
			}
			if d := names.Levenshtein(q, k); c.dist < 0 || d < c.dist {
				c.dist = d
			}
			c.prefix = max(c.prefix, names.CommonPrefix(q, k))
		}
		if c.sub || c.dist <= limit {
			cs = append(cs, c)
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.sub != b.sub {
			return a.sub
		}
		if a.dist != b.dist {
			return a.dist < b.dist
		}
		if a.prefix != b.prefix {
			return a.prefix > b.prefix
		}
		return a.id < b.id
	})
	out := make([]string, 0, min(n, len(cs)))
	for _, c := range cs[:min(n, len(cs))] {
		out = append(out, c.id)
	}
	return out
}

// Check parses every entry of the embedded catalog and reports each problem
// on its own line: malformed or duplicate entries, clashing aliases, missing
// or unused config files, configs the parser rejects. Lookup skips broken
// entries silently; Check is how the catalog's tests see them.
func Check() error {
	return check(embeddedIndex())
}

func check(ix *index) error {
	errs := []error{ix.err}
	used := map[string]bool{}
	for i, e := range ix.entries {
		used[e.Config] = true
		s, err := ix.spec(i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Again after the entry's checkpoint size is applied.
		if err := s.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("model catalog: %s: %w", e.ID, err))
		}
	}
	files, err := fs.ReadDir(ix.fsys, configDir)
	if err != nil && ix.err == nil {
		errs = append(errs, fmt.Errorf("model catalog: %w", err))
	}
	for _, f := range files {
		if !used[f.Name()] {
			errs = append(errs, fmt.Errorf("model catalog: %s/%s is not used by any entry", configDir, f.Name()))
		}
	}
	return errors.Join(errs...)
}
