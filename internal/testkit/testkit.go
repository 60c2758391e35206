// Package testkit holds fixtures more than one package's tests share: a
// buffer a command and the test may use at once, and the AdmissionReview
// of a Deployment of many vLLM containers that the webhook's budget tests
// and the hostile-client tests send. Only tests import it.
package testkit

import (
	"bytes"
	"fmt"
	"sync"
)

// SyncBuffer is a bytes.Buffer safe to read while another goroutine (a
// child process's output, a ticker) writes to it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Review is an AdmissionReview (uid) creating a Deployment of n vLLM
// containers named c0, c1, ..., each serving Qwen/Qwen2.5-7B-Instruct at
// max-model-len 8192 with gpus of nvidia.com/gpu; gpu, when not empty, is
// the pod template's headroom.dev/gpu annotation. 10,000 containers are
// about 2.2 MB.
func Review(uid, gpu string, n int, gpus string) []byte {
	var b bytes.Buffer
	annotations := ""
	if gpu != "" {
		annotations = fmt.Sprintf(`,"annotations":{"headroom.dev/gpu":%q}`, gpu)
	}
	fmt.Fprintf(&b, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":%q,`+
		`"kind":{"group":"apps","version":"v1","kind":"Deployment"},"resource":{"group":"apps","version":"v1","resource":"deployments"},`+
		`"name":"big","namespace":"llm","operation":"CREATE","object":{"metadata":{"name":"big","namespace":"llm"},`+
		`"spec":{"selector":{"matchLabels":{"app":"llm"}},"template":{"metadata":{"labels":{"app":"llm"}%s},"spec":{"containers":[`, uid, annotations)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"c%d","image":"vllm/vllm-openai:v0.19.0","ports":[{"containerPort":8000}],`+
			`"args":["--model","Qwen/Qwen2.5-7B-Instruct","--max-model-len","8192"],"resources":{"limits":{"nvidia.com/gpu":%q}}}`, i, gpus)
	}
	b.WriteString(`]}}}}}}`)
	return b.Bytes()
}
