package registry_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fairway-sched/fairway/adapters/registry"
)

// frameworkNames are the names people know each adapter's framework by, keyed by the adapter's
// Name(); "" marks an adapter that is no framework (gangs users name themselves, the plain-pod
// fallback). Every adapter of the registry must have an entry, so a new adapter fails here until
// it has a name, and then fails TestProseListsNameEveryFramework until the prose names it.
var frameworkNames = map[string]string{
	"kubeflow-pipelines": "Kubeflow Pipelines",
	"argo":               "Argo Workflows",
	"ray":                "KubeRay",
	"kubeflow-notebook":  "Kubeflow Notebooks",
	"jupyterhub":         "JupyterHub",
	"pytorchjob":         "PyTorchJob",
	"mpijob":             "MPIJob",
	"tfjob":              "TFJob",
	"xgboostjob":         "XGBoostJob",
	"paddlejob":          "PaddleJob",
	"jaxjob":             "JAXJob",
	"jobset":             "JobSet",
	"airflow":            "Airflow",
	"mlflow":             "MLflow",
	"leaderworkerset":    "LeaderWorkerSet",
	"kserve":             "KServe",
	"knative":            "Knative",
	"triton":             "Triton",
	"vllm":               "vLLM",
	"gang":               "",
	"none":               "",
}

// proseLists are the files, relative to the repository root, that list the supported frameworks
// for people: the package doc of the adapters, the webhook's command help, the chart's
// description and its install notes.
var proseLists = []string{
	"adapters/doc.go",
	"cmd/fairway/webhook.go",
	"charts/fairway/Chart.yaml",
	"charts/fairway/templates/NOTES.txt",
}

// lineBreak is a line break with the indentation and comment marker of the next line, so that a
// name wrapped across two lines of a comment or of folded YAML still reads as one.
var lineBreak = regexp.MustCompile(`[ \t]*\n[ \t]*(//[ \t]?)?`)

// TestFrameworkNamesMatchTheRegistry keeps frameworkNames to the registry, both ways.
func TestFrameworkNamesMatchTheRegistry(t *testing.T) {
	inRegistry := map[string]bool{}
	for _, a := range registry.All() {
		inRegistry[a.Name()] = true
		if _, ok := frameworkNames[a.Name()]; !ok {
			t.Errorf("adapter %q has no entry in frameworkNames: add the name people know its framework by", a.Name())
		}
	}
	for name := range frameworkNames {
		if !inRegistry[name] {
			t.Errorf("frameworkNames has %q, which is no adapter of the registry: remove it", name)
		}
	}
}

// TestProseListsNameEveryFramework: each prose list of frameworks names every framework of the
// registry, so that the lists stop drifting from what the webhook supports.
func TestProseListsNameEveryFramework(t *testing.T) {
	for _, path := range proseLists {
		b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(path)))
		if err != nil {
			t.Fatal(err)
		}
		text := lineBreak.ReplaceAllString(string(b), " ")
		var missing []string
		for _, a := range registry.All() {
			if name := frameworkNames[a.Name()]; name != "" && !strings.Contains(text, name) {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			t.Errorf("%s does not name %s", path, strings.Join(missing, ", "))
		}
	}
}
