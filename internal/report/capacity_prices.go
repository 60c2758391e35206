package report

// Price is one GPU's on-demand price per GPU hour and where it is from.
type Price struct {
	USDPerGPUHour float64
	Source        string
}

// PriceTableSource says where the default prices come from; the output
// prints it.
const PriceTableSource = "public on-demand list prices as of 2025-06 (Lambda per GPU hour; AWS EC2 us-east-1 one-GPU instances, whole instance): they change, so give --price GPU=USD_PER_HOUR for yours"

// DefaultPrices is the default price table, by catalog GPU name. A GPU of
// a multi-GPU instance is the instance's price over its GPUs; a one-GPU
// instance's price includes its CPUs and memory.
func DefaultPrices() map[string]Price {
	lambda := "Lambda on-demand, 2025-06"
	aws := func(instance string) string { return "AWS EC2 " + instance + " on-demand, us-east-1, 2025-06" }
	return map[string]Price{
		"B200":      {4.99, lambda},
		"H100-80GB": {2.99, lambda + " (8x H100 SXM)"},
		"A100-80GB": {1.79, lambda + " (8x A100 SXM 80GB)"},
		"A100-40GB": {1.29, lambda + " (1x A100 40GB)"},
		"A10":       {0.75, lambda + " (1x A10)"},
		"L40S":      {1.861, aws("g6e.xlarge")},
		"L4":        {0.8048, aws("g6.xlarge")},
		"A10G":      {1.006, aws("g5.xlarge")},
		"T4":        {0.526, aws("g4dn.xlarge")},
	}
}
