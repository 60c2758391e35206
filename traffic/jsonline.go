package traffic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// MaxTokens bounds one request's prompt or output tokens for every reader
// of request logs: far beyond any context window, and a typo (or a
// corrupt line) away from a run that cannot end.
const MaxTokens = 10_000_000

// JSONRequest is a line of headroom's own request format: what simulate
// --trace and loadtest --trace write and --requests reads, {"id",
// "arrival_s", "prompt_tokens", "output_tokens", "prefix_id",
// "prefix_tokens", "endpoint"} (other fields, a trace's first_token_s or
// error, are read past).
type JSONRequest struct {
	ID string
	// ArrivalS is the request's time in seconds from the traffic's start.
	ArrivalS float64
	// Prompt, Output and PrefixTokens are -1 where the line has none.
	Prompt, Output, PrefixTokens int64
	PrefixID                     uint64
	// Endpoint is the line's own spelling, "" when absent.
	Endpoint    string
	HasEndpoint bool
}

var arrivalKey = []byte(`"arrival_s"`)

// IsJSONRequest reports whether line is in headroom's own format: a JSON
// object with an "arrival_s". Such a line is read by ParseJSONRequest,
// strictly: it was written to be replayed.
func IsJSONRequest(line []byte) bool {
	return len(line) > 0 && line[0] == '{' && bytes.Contains(line, arrivalKey)
}

// jsonRequest decodes the format; pointers tell a missing field from a
// zero one. Numbers are read as they are written and judged by
// tokenCount, so 1e15 is "more than the limit", not a decoder's type
// error.
type jsonRequest struct {
	ID           *string         `json:"id"`
	Arrival      *float64        `json:"arrival_s"`
	Prompt       json.RawMessage `json:"prompt_tokens"`
	Output       json.RawMessage `json:"output_tokens"`
	PrefixID     uint64          `json:"prefix_id"`
	PrefixTokens json.RawMessage `json:"prefix_tokens"`
	Endpoint     *string         `json:"endpoint"`
}

// ParseJSONRequest reads a line IsJSONRequest accepts. Its errors say
// what is wrong with the line (not which line: the caller knows).
func ParseJSONRequest(line []byte) (JSONRequest, error) {
	var j jsonRequest
	if err := json.Unmarshal(line, &j); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			want := "number"
			if te.Field == "id" || te.Field == "endpoint" {
				want = "string"
			}
			return JSONRequest{}, fmt.Errorf("%s must be a %s, not a JSON %s", te.Field, want, te.Value)
		}
		return JSONRequest{}, fmt.Errorf("not a JSON request: %v", err)
	}
	if j.Arrival == nil || *j.Arrival < 0 || math.IsNaN(*j.Arrival) || math.IsInf(*j.Arrival, 0) {
		return JSONRequest{}, errors.New("arrival_s must be a number of seconds, not negative")
	}
	r := JSONRequest{ArrivalS: *j.Arrival, PrefixID: j.PrefixID}
	var err error
	if r.Prompt, err = tokenCount("prompt_tokens", j.Prompt); err != nil {
		return JSONRequest{}, err
	}
	if r.Output, err = tokenCount("output_tokens", j.Output); err != nil {
		return JSONRequest{}, err
	}
	if r.PrefixTokens, err = tokenCount("prefix_tokens", j.PrefixTokens); err != nil {
		return JSONRequest{}, err
	}
	if j.ID != nil {
		r.ID = *j.ID
	}
	if j.Endpoint != nil {
		r.Endpoint, r.HasEndpoint = *j.Endpoint, true
	}
	return r, nil
}

// tokenCount reads a token count of a JSON line: a whole number from 0 to
// MaxTokens, or absent (-1).
func tokenCount(name string, raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return -1, nil
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s %s: want a whole number of tokens", name, clip(raw))
	case v < 0 || v != math.Trunc(v):
		return 0, fmt.Errorf("%s %s: want a whole number of tokens, not negative", name, clip(raw))
	case v > MaxTokens:
		return 0, fmt.Errorf("%s %s: more than the %d tokens a request may have", name, clip(raw), MaxTokens)
	}
	return int64(v), nil
}

// CheckCounts refuses a record of more tokens than a request may have.
func CheckCounts(r Record) error {
	if r.Input > MaxTokens || r.Output > MaxTokens {
		return fmt.Errorf("%d prompt and %d output tokens: more than the %d tokens a request may have", r.Input, r.Output, MaxTokens)
	}
	return nil
}

// clip is a value for a message: at most 40 bytes of it.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// relativeBase is where a time that counts from the traffic's start (a
// JSON request's arrival_s) is placed: the year-less times' base, since
// only differences between such times mean anything.
var relativeBase = time.Date(noYearBase, 1, 1, 0, 0, 0, 0, time.UTC).Unix()

// record is the Record of a JSON request: its counts (absent ones 0) and
// its time from the traffic's start, placed as a time without a year.
func (j JSONRequest) record() Record {
	// Past a century a time is no traffic's (a replay holds its due
	// times there too), and it stays far from the int64 seconds' limit.
	sec, frac := math.Modf(min(j.ArrivalS, 100*365*24*3600))
	return Record{Input: max(j.Prompt, 0), Output: max(j.Output, 0), Unix: relativeBase + int64(sec), Nano: int32(frac * 1e9), HasTime: true, NoYear: true}
}
