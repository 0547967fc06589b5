package cluster

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"sort"
)

// CompleteDelayAnnotation is kwok's pod annotation for "finish this pod after a delay" (a Go
// duration such as "30s"). The cluster's stages honour it on every pod, not only on Job pods as
// kwok's stock stages do, and finish the pod Succeeded with all containers exit code 0.
const CompleteDelayAnnotation = "pod-complete.stage.kwok.x-k8s.io/delay"

// stageFiles are the kwok Stages the cluster's kwok plays; see the comment at the top of each.
//
//go:embed stages/*.yaml
var stageFiles embed.FS

// metricFiles are kwok's Metric and ClusterResourceUsage for Config.KwokMetrics.
//
//go:embed kwokmetrics/*.yaml
var metricFiles embed.FS

// writeKwokConfig concatenates the embedded stages (and, with metrics, the resource metrics and
// usage of kwokmetrics), and its options when podParallelism is set, into one multi-document
// file for kwok's -c.
func writeKwokConfig(path string, metrics bool, podParallelism uint) error {
	names, err := fs.Glob(stageFiles, "stages/*.yaml")
	if err != nil {
		return fmt.Errorf("listing kwok stages: %w", err)
	}
	sort.Strings(names)
	files := []fs.FS{}
	for range names {
		files = append(files, stageFiles)
	}
	if metrics {
		more, err := fs.Glob(metricFiles, "kwokmetrics/*.yaml")
		if err != nil {
			return fmt.Errorf("listing kwok metrics: %w", err)
		}
		sort.Strings(more)
		names = append(names, more...)
		for range more {
			files = append(files, metricFiles)
		}
	}
	var buf bytes.Buffer
	for i, name := range names {
		b, err := fs.ReadFile(files[i], name)
		if err != nil {
			return fmt.Errorf("reading kwok stage %s: %w", name, err)
		}
		buf.WriteString("---\n")
		buf.Write(bytes.TrimSpace(b))
		buf.WriteString("\n")
	}
	if podParallelism > 0 {
		// kwok does not default the options of a configuration it reads (v0.8.0): the other
		// parallelisms are its defaults, spelled out.
		fmt.Fprintf(&buf, "---\napiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions:\n"+
			"  podPlayStageParallelism: %d\n  nodePlayStageParallelism: 4\n  nodeLeaseParallelism: 4\n  podsOnNodeSyncParallelism: 1\n", podParallelism)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the kwok config: %w", err)
	}
	return nil
}
