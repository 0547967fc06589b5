package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fieldOwner is the server-side apply field manager of everything the cluster applies.
const fieldOwner = "fairway-test-cluster"

// ApplyCRDs creates or replaces every CustomResourceDefinition in the YAML files of dirs
// (kustomization.yaml and non-CRD documents are skipped) and waits until each is Established,
// so custom resources can be created as soon as it returns. The API server compiles CRD CEL
// rules on apply, so a rule that does not compile fails here with the API server's message.
func (c *Cluster) ApplyCRDs(ctx context.Context, dirs ...string) error {
	var crds []*unstructured.Unstructured
	for _, dir := range dirs {
		objs, err := readManifests(dir)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, o)
			}
		}
	}
	return c.applyAndWait(ctx, crds)
}

// ApplyCRDObjects creates or replaces the CustomResourceDefinitions among objs (other kinds are
// skipped) and waits until each is Established, like ApplyCRDs.
func (c *Cluster) ApplyCRDObjects(ctx context.Context, objs ...*unstructured.Unstructured) error {
	var crds []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		}
	}
	return c.applyAndWait(ctx, crds)
}

// Apply server-side applies objects (forcing ownership), one after the other.
func (c *Cluster) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, o := range objs {
		if err := c.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// applyAndWait creates (or replaces) CRDs in parallel, then waits for all to be Established.
// Create/update rather than server-side apply: tracking field ownership of a megabyte of schema
// (KubeRay's CRDs) costs the API server seconds per CRD, which tests do not need.
func (c *Cluster) applyAndWait(ctx context.Context, crds []*unstructured.Unstructured) error {
	errs := make([]error, len(crds))
	var wg sync.WaitGroup
	for i, crd := range crds {
		wg.Go(func() { errs[i] = c.createOrReplace(ctx, crd.DeepCopy()) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, crd := range crds {
		name := crd.GetName()
		err := poll(ctx, 100*time.Millisecond, "CRD "+name+" to be established", nil, func(ctx context.Context) (bool, error) {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(crd.GroupVersionKind())
			if err := c.client.Get(ctx, types.NamespacedName{Name: name}, got); err != nil {
				return false, nil
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return err
		}
		// Established is not yet served: discovery lags it, and the client's REST mapper
		// caches what discovery said (CI once got "no matches for kind Queue" right after).
		// Each miss makes the mapper look again.
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		err = poll(ctx, 100*time.Millisecond, "CRD "+name+" to be served", nil, func(context.Context) (bool, error) {
			_, err := c.client.RESTMapper().RESTMapping(schema.GroupKind{Group: group, Kind: kind})
			return err == nil, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// createOrReplace creates obj, or replaces the existing object of that name.
func (c *Cluster) createOrReplace(ctx context.Context, obj *unstructured.Unstructured) error {
	err := c.client.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(obj.GroupVersionKind())
		if err = c.client.Get(ctx, client.ObjectKeyFromObject(obj), existing); err == nil {
			obj.SetResourceVersion(existing.GetResourceVersion())
			err = c.client.Update(ctx, obj)
		}
	}
	if err != nil {
		return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// readManifests decodes every YAML document of the *.yaml and *.yml files in dir, in file name
// order, skipping kustomization.yaml and empty documents.
func readManifests(dir string) ([]*unstructured.Unstructured, error) {
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no YAML manifests in %s", dir)
	}
	sort.Strings(files)
	var objs []*unstructured.Unstructured
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "kustomization.") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading manifests: %w", err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("decoding %s: %w", f, err)
			}
			if len(m) == 0 {
				continue
			}
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	return objs, nil
}
