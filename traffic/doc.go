// Package traffic reads request logs and sizes the traffic they describe:
// input, output and total tokens per request as bounded-memory histograms,
// S/M/L/XL buckets by total tokens, the share of long requests per time
// window with a surge flag, and the KV-cache concurrency each bucket gets
// from a memory plan, with a short/long pool split whose flags come from
// memory.Recommend.
//
// Three line formats are read, recognised per line so a file may mix
// them:
//
//   - key=value lines: input_tokens=/output_tokens= or
//     prompt_tokens=/completion_tokens= (also "key: value");
//   - JSON lines holding an OpenAI usage object ("prompt_tokens",
//     "completion_tokens", or the Responses API's "input_tokens",
//     "output_tokens"), at any depth;
//   - vLLM's own request log ("Received request ...": num_prompt_tokens or
//     the prompt_token_ids list, and max_tokens of the SamplingParams).
//
// Gzip input is recognised by its magic bytes. The hot path scans bytes
// with the vectorised bytes.IndexByte and parses integers by hand: no
// regular expressions and no allocation per line. Key=value counts side by
// side ("input_tokens=N output_tokens=M") are read without a second search.
// Files are parsed in chunks on several goroutines, each reading its chunk
// with ReadAt into a buffer that stays in its core's cache (ReadFile);
// streams are read in large blocks (Read). bench/profile compares the speed with
// `wc -l` and the seed's awk script.
package traffic
