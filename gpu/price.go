package gpu

// Price is one GPU's on-demand price for an hour and where it is from.
type Price struct {
	USDPerGPUHour float64
	Source        string
}

// PriceSource says where the default prices come from, in one line the
// output prints.
const PriceSource = "AWS EC2 on-demand list prices, us-east-1, Linux, as of 2025-06 (a GPU of an 8-GPU instance is an eighth of the instance; a one-GPU instance is whole, with its CPUs and memory): prices change and differ by provider, region and commitment, so give --price GPU=USD_PER_HOUR for yours"

// Prices is the default price table, by catalog device name: one source
// class (one provider, one region, on-demand, one date), so two options
// compare on the same footing. A device AWS does not rent (A10, MI300X,
// ...) has no default price: give --price.
//
// The 8-GPU instances' prices are the list prices before 2025-06-05 less
// the cuts AWS announced that day for on-demand P4 and P5 instances (P5
// 44%, P4d and P4de 33%); the P6 (B200) launched in 2025-05 at its price;
// the G instances were not cut.
func Prices() map[string]Price {
	aws := func(instance string) string { return "AWS EC2 " + instance + " on-demand, us-east-1, 2025-06" }
	return map[string]Price{
		"B200":      {113.9328 / 8, aws("p6-b200.48xlarge (8x B200)")},
		"H100-80GB": {55.04 / 8, aws("p5.48xlarge (8x H100 80GB)")},
		"A100-80GB": {27.447 / 8, aws("p4de.24xlarge (8x A100 80GB)")},
		"A100-40GB": {21.958 / 8, aws("p4d.24xlarge (8x A100 40GB)")},
		"L40S":      {1.861, aws("g6e.xlarge (1x L40S)")},
		"L4":        {0.8048, aws("g6.xlarge (1x L4)")},
		"A10G":      {1.006, aws("g5.xlarge (1x A10G)")},
		"T4":        {0.526, aws("g4dn.xlarge (1x T4)")},
	}
}
