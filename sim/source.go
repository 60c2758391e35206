package sim

import "headroom.dev/headroom/workload"

// FromWorkload is the engine's view of a workload's requests: due at
// their time, as the client sends them.
func FromWorkload(st workload.Stream) Source { return fromWorkload{st} }

type fromWorkload struct{ st workload.Stream }

func (f fromWorkload) Next() (Request, error) {
	r, err := f.st.Next()
	if err != nil {
		return Request{}, err
	}
	return Request{ID: r.ID, Arrival: r.At, PromptTokens: r.Prompt, OutputTokens: r.Output, PrefixID: r.PrefixID, PrefixTokens: r.PrefixTokens, Endpoint: r.Endpoint}, nil
}
