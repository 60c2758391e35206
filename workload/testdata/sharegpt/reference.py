# vllm bench serve's ShareGPT sampling (vllm/benchmarks/datasets.py:
# ShareGPTDataset.load_data and sample, is_valid_sequence,
# BenchmarkDataset.maybe_oversample_requests), restated with the token
# counts headroom estimates (UTF-8 bytes / 4, rounded) in place of a
# tokenizer, to print the order the Go test expects. Run with CPython:
#   python3 reference.py sharegpt_synthetic.json NUM SEED [OUTPUT_LEN]
import json
import random
import sys


def tokens(text):
    return (len(text.encode("utf-8")) + 2) // 4


def is_valid_sequence(prompt_len, output_len, min_len=4, max_prompt_len=1024,
                      max_total_len=2048, skip_min_output_len_check=False):
    prompt_too_short = prompt_len < min_len
    output_too_short = (not skip_min_output_len_check) and (output_len < min_len)
    prompt_too_long = prompt_len > max_prompt_len
    combined_too_long = (prompt_len + output_len) > max_total_len
    return not (prompt_too_short or output_too_short or prompt_too_long or combined_too_long)


def main(path, num, seed, output_len=None):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    data = [e for e in data if "conversations" in e and len(e["conversations"]) >= 2]
    random.seed(seed)
    random.shuffle(data)
    samples = []
    for entry in data:
        if len(samples) >= num:
            break
        prompt, completion = entry["conversations"][0]["value"], entry["conversations"][1]["value"]
        prompt_len = tokens(prompt)
        new_output_len = tokens(completion) if output_len is None else output_len
        if not is_valid_sequence(prompt_len, new_output_len, skip_min_output_len_check=output_len is not None):
            continue
        samples.append((entry["id"], prompt_len, new_output_len))
    if len(samples) < num:
        random.seed(seed)
        samples += [random.choice(samples) for _ in range(num - len(samples))]
    for s in samples:
        print(*s)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else None)
