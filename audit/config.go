package audit

import (
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Connection says how to reach the API server, as kubectl's flags do.
type Connection struct {
	// Kubeconfig is the file to read; "" looks as kubectl does.
	Kubeconfig, Context string
	// Namespace is audited unless AllNamespaces; "" is the context's.
	Namespace     string
	AllNamespaces bool
	// Timeout bounds each request to the API server.
	Timeout time.Duration
	// Getenv reads KUBECONFIG and HOME; nil reads nothing.
	Getenv func(string) string
}

// Config finds the API server and the namespace to audit: Kubeconfig,
// else $KUBECONFIG, else ~/.kube/config, else the in-cluster service
// account (client-go's deferred loading, with the environment read
// through Getenv). The namespace is "" with AllNamespaces, else the one
// given, the context's, or "default". The error is one line.
func Config(c Connection) (*rest.Config, string, error) {
	getenv := c.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: c.Kubeconfig}
	if c.Kubeconfig == "" {
		if kc := getenv("KUBECONFIG"); kc != "" {
			rules.Precedence = filepath.SplitList(kc)
		} else if home := getenv("HOME"); home != "" {
			rules.Precedence = []string{filepath.Join(home, ".kube", "config")}
		}
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("API server configuration: %v (give --kubeconfig, or run in a cluster)", oneLine(err))
	}
	ns := c.Namespace
	if ns == "" && !c.AllNamespaces {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	cfg.Timeout = c.Timeout
	cfg.UserAgent = "headroom-audit"
	// Hundreds of workloads mean a few hundred reads (HPAs, ConfigMaps);
	// client-go's default of 5 per second would take minutes.
	cfg.QPS, cfg.Burst = 50, 100
	cfg.Wrap(LimitResponses)
	return cfg, ns, nil
}
