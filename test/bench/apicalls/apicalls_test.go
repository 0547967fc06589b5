package apicalls

import (
	"strings"
	"testing"
)

func TestSumCounter(t *testing.T) {
	const text = `# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",resource="pods",subresource="binding",verb="POST"} 2000
apiserver_request_total{code="200",component="apiserver",resource="pods",subresource="",verb="LIST"} 3
apiserver_request_total{code="409",component="apiserver",resource="pods",subresource="binding",verb="POST"} 5
# HELP other_total Not this one.
# TYPE other_total counter
other_total{verb="POST"} 7
`
	got, err := sumCounter(strings.NewReader(text), "apiserver_request_total", func(l map[string]string) string {
		return l["verb"] + " " + l["resource"] + "/" + l["subresource"]
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["POST pods/binding"] != 2005 || got["LIST pods/"] != 3 {
		t.Fatalf("got %v, want POST pods/binding 2005 and LIST pods/ 3", got)
	}
}
