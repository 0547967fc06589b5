package examples

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The JupyterHub example is a zero-to-jupyterhub values.yaml. The hub and KubeSpawner are Python
// and do not run on a local cluster, so RenderNotebook builds the pod KubeSpawner 7.x builds for a
// user who picks a profile, from the chart's mapping of values to KubeSpawner settings
// (jupyterhub/files/hub/jupyterhub_config.py) and KubeSpawner's make_pod (kubespawner/objects.py).

// Versions the rendering follows.
const (
	Z2JHChartVersion   = "4.4.0"
	KubeSpawnerVersion = "7.1.0"
	JupyterHubVersion  = "5.3.0"
)

// Z2JHValues is the part of zero-to-jupyterhub's values that shapes single-user pods. Other keys
// (hub, proxy, ingress, ...) are ignored.
type Z2JHValues struct {
	Singleuser Z2JHSingleuser `json:"singleuser"`
	Scheduling Z2JHScheduling `json:"scheduling"`
}

// Z2JHSingleuser is the chart's singleuser section. Unset fields take the chart's defaults.
type Z2JHSingleuser struct {
	Image struct {
		Name string `json:"name"`
		Tag  string `json:"tag"`
	} `json:"image"`
	Memory struct {
		Guarantee string `json:"guarantee"`
		Limit     string `json:"limit"`
	} `json:"memory"`
	CPU struct {
		Guarantee *float64 `json:"guarantee"`
		Limit     *float64 `json:"limit"`
	} `json:"cpu"`
	ExtraLabels      map[string]string `json:"extraLabels"`
	ExtraAnnotations map[string]string `json:"extraAnnotations"`
	ExtraResource    struct {
		Limits     map[string]string `json:"limits"`
		Guarantees map[string]string `json:"guarantees"`
	} `json:"extraResource"`
	NodeSelector     map[string]string   `json:"nodeSelector"`
	ExtraTolerations []corev1.Toleration `json:"extraTolerations"`
	StartTimeout     int                 `json:"startTimeout"`
	Storage          struct {
		Type          string `json:"type"`
		HomeMountPath string `json:"homeMountPath"`
		Capacity      string `json:"capacity"`
		Dynamic       struct {
			StorageClass       *string                             `json:"storageClass"`
			StorageAccessModes []corev1.PersistentVolumeAccessMode `json:"storageAccessModes"`
		} `json:"dynamic"`
	} `json:"storage"`
	CloudMetadata struct {
		BlockWithIptables *bool  `json:"blockWithIptables"`
		IP                string `json:"ip"`
	} `json:"cloudMetadata"`
	ProfileList []Z2JHProfile `json:"profileList"`
}

// Z2JHProfile is one entry of singleuser.profileList (KubeSpawner's profile_list).
type Z2JHProfile struct {
	DisplayName string `json:"display_name"`
	Slug        string `json:"slug"`
	Description string `json:"description"`
	Default     bool   `json:"default"`
	// KubespawnerOverride sets KubeSpawner traits for this profile; dict traits are merged into
	// the chart's, others replace them.
	KubespawnerOverride map[string]any `json:"kubespawner_override"`
}

// Z2JHScheduling is the chart's scheduling section.
type Z2JHScheduling struct {
	UserScheduler struct {
		Enabled *bool `json:"enabled"`
	} `json:"userScheduler"`
	UserPlaceholder struct {
		Enabled *bool `json:"enabled"`
	} `json:"userPlaceholder"`
	PodPriority struct {
		Enabled *bool `json:"enabled"`
	} `json:"podPriority"`
	UserPods struct {
		NodeAffinity struct {
			MatchNodePurpose string `json:"matchNodePurpose"`
		} `json:"nodeAffinity"`
		Tolerations []corev1.Toleration `json:"tolerations"`
	} `json:"userPods"`
}

// ParseZ2JHValues reads a values.yaml.
func ParseZ2JHValues(data []byte) (*Z2JHValues, error) {
	var v Z2JHValues
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	return &v, nil
}

// Profile returns the profile of a slug.
func (v *Z2JHValues) Profile(slug string) (Z2JHProfile, bool) {
	for _, p := range v.Singleuser.ProfileList {
		if p.Slug == slug {
			return p, true
		}
	}
	return Z2JHProfile{}, false
}

// NotebookOptions say whose notebook to render, and how.
type NotebookOptions struct {
	// Release is the Helm release name (helm install <release> jupyterhub/jupyterhub).
	Release   string
	Namespace string
	User      string
	// ServerName is the named server; "" for the user's default server.
	ServerName string
	// Profile is the slug of the profile the user picked; "" for the default profile.
	Profile string
	// NoHomeVolume leaves out the home directory's PersistentVolumeClaim (z2jh's default
	// singleuser.storage.type dynamic mounts one; RenderHomeClaim renders it).
	NoHomeVolume bool
}

// kubespawnerTraits are the settings a profile's kubespawner_override may change here; an
// unknown one is an error, so a typo in values.yaml fails a test instead of silently doing
// nothing.
type kubespawnerTraits struct {
	image                  string
	memGuarantee, memLimit string
	cpuGuarantee, cpuLimit *float64
	extraLabels            map[string]string
	extraAnnotations       map[string]string
	extraResourceLimits    map[string]string
	extraResourceGuarantee map[string]string
	nodeSelector           map[string]string
	tolerations            []corev1.Toleration
	schedulerName          string
	priorityClassName      string
}

func (tr *kubespawnerTraits) override(o map[string]any) error {
	keys := slices.Sorted(maps.Keys(o))
	for _, k := range keys {
		v := o[k]
		var err error
		switch k {
		case "image":
			tr.image, err = str(v)
		case "mem_guarantee":
			tr.memGuarantee, err = str(v)
		case "mem_limit":
			tr.memLimit, err = str(v)
		case "cpu_guarantee":
			tr.cpuGuarantee, err = num(v)
		case "cpu_limit":
			tr.cpuLimit, err = num(v)
		case "extra_labels":
			err = mergeInto(tr.extraLabels, v)
		case "extra_annotations":
			err = mergeInto(tr.extraAnnotations, v)
		case "extra_resource_limits":
			err = mergeInto(tr.extraResourceLimits, v)
		case "extra_resource_guarantees":
			err = mergeInto(tr.extraResourceGuarantee, v)
		case "node_selector":
			err = mergeInto(tr.nodeSelector, v)
		case "tolerations":
			err = convert(v, &tr.tolerations)
		case "scheduler_name":
			tr.schedulerName, err = str(v)
		case "priority_class_name":
			tr.priorityClassName, err = str(v)
		default:
			return fmt.Errorf("kubespawner_override.%s: not a KubeSpawner setting this renderer knows", k)
		}
		if err != nil {
			return fmt.Errorf("kubespawner_override.%s: %w", k, err)
		}
	}
	return nil
}

func str(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case float64, int64, int:
		return fmt.Sprint(x), nil
	}
	return "", fmt.Errorf("want a string, got %T", v)
}

func num(v any) (*float64, error) {
	switch x := v.(type) {
	case float64:
		return &x, nil
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return &f, err
	}
	return nil, fmt.Errorf("want a number, got %T", v)
}

// mergeInto merges a dict override into a dict trait (KubeSpawner's recursive_update). Values
// must be strings: Kubernetes labels, annotations and quantities are.
func mergeInto(dst map[string]string, v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("want a mapping, got %T", v)
	}
	for k, x := range m {
		s, ok := x.(string)
		if !ok {
			return fmt.Errorf("%s: want a string (quote it), got %T", k, x)
		}
		dst[k] = s
	}
	return nil
}

func convert(v any, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// parseBytes reads a KubeSpawner ByteSpecification ("4G", "512M", "1073741824"): K, M, G and T
// are powers of 1024.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			s = s[:n-1]
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("byte specification %q: %w", s, err)
	}
	return int64(f * float64(mult)), nil
}

// RenderNotebook returns the pod KubeSpawner creates when o.User starts a server with profile
// o.Profile, under the chart values v.
func RenderNotebook(v *Z2JHValues, o NotebookOptions) (*corev1.Pod, error) {
	tr := notebookTraits(v, o)
	if err := tr.applyProfile(v.Singleuser.ProfileList, o.Profile); err != nil {
		return nil, err
	}
	userServer := o.User
	if o.ServerName != "" {
		userServer += "--" + o.ServerName
	}
	labels, annotations := notebookMeta(&tr, o)
	res, env, err := notebookResources(&tr, o)
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "jupyter-" + userServer, Namespace: o.Namespace, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			SchedulerName:                tr.schedulerName,
			PriorityClassName:            tr.priorityClassName,
			RestartPolicy:                corev1.RestartPolicyOnFailure,
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext:              &corev1.PodSecurityContext{FSGroup: ptr.To[int64](100)},
			Tolerations:                  tr.tolerations,
			Containers: []corev1.Container{{
				Name:            "notebook",
				Image:           tr.image,
				Args:            []string{"jupyterhub-singleuser"},
				Ports:           []corev1.ContainerPort{{Name: "notebook-port", ContainerPort: 8888}},
				Env:             env,
				Resources:       res,
				SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000), AllowPrivilegeEscalation: ptr.To(false)},
			}},
		},
	}
	if len(tr.nodeSelector) > 0 {
		pod.Spec.NodeSelector = tr.nodeSelector
	}
	if err := matchNodePurpose(pod, v); err != nil {
		return nil, err
	}
	addCloudMetadataBlock(pod, v)
	addHomeVolume(pod, v, o, userServer)
	return pod, nil
}

// notebookTraits are the KubeSpawner traits z2jh's values set (singleuser, scheduling).
func notebookTraits(v *Z2JHValues, o NotebookOptions) kubespawnerTraits {
	su := v.Singleuser
	tr := kubespawnerTraits{
		image:                  "quay.io/jupyterhub/k8s-singleuser-sample:" + Z2JHChartVersion,
		memGuarantee:           "1G",
		memLimit:               su.Memory.Limit,
		cpuGuarantee:           su.CPU.Guarantee,
		cpuLimit:               su.CPU.Limit,
		extraLabels:            map[string]string{"hub.jupyter.org/network-access-hub": "true"},
		extraAnnotations:       map[string]string{},
		extraResourceLimits:    map[string]string{},
		extraResourceGuarantee: map[string]string{},
		nodeSelector:           map[string]string{},
	}
	if su.Image.Name != "" {
		tr.image = su.Image.Name
		if su.Image.Tag != "" {
			tr.image += ":" + su.Image.Tag
		}
	}
	if su.Memory.Guarantee != "" {
		tr.memGuarantee = su.Memory.Guarantee
	}
	if su.ExtraLabels != nil {
		tr.extraLabels = maps.Clone(su.ExtraLabels)
	}
	maps.Copy(tr.extraAnnotations, su.ExtraAnnotations)
	maps.Copy(tr.extraResourceLimits, su.ExtraResource.Limits)
	maps.Copy(tr.extraResourceGuarantee, su.ExtraResource.Guarantees)
	maps.Copy(tr.nodeSelector, su.NodeSelector)
	if ptr.Deref(v.Scheduling.UserScheduler.Enabled, true) {
		tr.schedulerName = o.Release + "-user-scheduler"
	}
	if ptr.Deref(v.Scheduling.PodPriority.Enabled, false) {
		tr.priorityClassName = o.Release + "-default-priority"
	}
	tr.tolerations = v.Scheduling.UserPods.Tolerations
	if tr.tolerations == nil {
		tr.tolerations = []corev1.Toleration{
			{Key: "hub.jupyter.org/dedicated", Operator: corev1.TolerationOpEqual, Value: "user", Effect: corev1.TaintEffectNoSchedule},
			{Key: "hub.jupyter.org_dedicated", Operator: corev1.TolerationOpEqual, Value: "user", Effect: corev1.TaintEffectNoSchedule},
		}
	}
	tr.tolerations = append(slices.Clone(tr.tolerations), su.ExtraTolerations...)
	return tr
}

// applyProfile applies the profile's kubespawner_override: the one picked, else the one marked
// default, else the first.
func (tr *kubespawnerTraits) applyProfile(profiles []Z2JHProfile, pick string) error {
	if len(profiles) > 0 {
		var prof *Z2JHProfile
		for i := range profiles {
			p := &profiles[i]
			if (pick != "" && p.Slug == pick) || (pick == "" && p.Default) {
				prof = p
				break
			}
		}
		if prof == nil && pick == "" {
			prof = &profiles[0]
		}
		if prof == nil {
			return fmt.Errorf("no profile %q in singleuser.profileList", pick)
		}
		if err := tr.override(prof.KubespawnerOverride); err != nil {
			return fmt.Errorf("profile %s: %w", prof.Slug, err)
		}
	} else if pick != "" {
		return fmt.Errorf("no profile %q: singleuser.profileList is empty", pick)
	}
	return nil
}

// notebookMeta is the pod's labels (z2jh's common labels, KubeSpawner's own, the extra ones)
// and annotations.
func notebookMeta(tr *kubespawnerTraits, o NotebookOptions) (labels, annotations map[string]string) {
	labels = map[string]string{
		// z2jh replaces KubeSpawner's common_labels with the chart's.
		"app":                          "jupyterhub",
		"app.kubernetes.io/name":       "jupyterhub",
		"release":                      o.Release,
		"app.kubernetes.io/instance":   o.Release,
		"chart":                        "jupyterhub-" + Z2JHChartVersion,
		"helm.sh/chart":                "jupyterhub-" + Z2JHChartVersion,
		"app.kubernetes.io/managed-by": "kubespawner",
		// KubeSpawner's own.
		"component":                   "singleuser-server",
		"app.kubernetes.io/component": "singleuser-server",
		"hub.jupyter.org/username":    o.User,
		"hub.jupyter.org/servername":  o.ServerName,
	}
	maps.Copy(labels, tr.extraLabels)
	annotations = map[string]string{
		"hub.jupyter.org/username":            o.User,
		"hub.jupyter.org/kubespawner-version": KubeSpawnerVersion,
		"hub.jupyter.org/jupyterhub-version":  JupyterHubVersion,
	}
	if o.ServerName != "" {
		annotations["hub.jupyter.org/servername"] = o.ServerName
	}
	maps.Copy(annotations, tr.extraAnnotations)
	return labels, annotations
}

// notebookResources is the notebook container's resources and the environment KubeSpawner
// sets, with the memory and CPU guarantees and limits it passes in both.
func notebookResources(tr *kubespawnerTraits, o NotebookOptions) (corev1.ResourceRequirements, []corev1.EnvVar, error) {
	var res corev1.ResourceRequirements
	env := []corev1.EnvVar{
		{Name: "JUPYTERHUB_USER", Value: o.User},
		{Name: "JUPYTERHUB_SERVER_NAME", Value: o.ServerName},
		{Name: "JUPYTER_IMAGE_SPEC", Value: tr.image},
		{Name: "JUPYTER_IMAGE", Value: tr.image},
	}
	add := func(list *corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[name] = q
	}
	for _, m := range []struct {
		spec string
		list *corev1.ResourceList
		env  string
	}{{tr.memGuarantee, &res.Requests, "MEM_GUARANTEE"}, {tr.memLimit, &res.Limits, "MEM_LIMIT"}} {
		if m.spec == "" {
			continue
		}
		b, err := parseBytes(m.spec)
		if err != nil {
			return res, nil, err
		}
		add(m.list, corev1.ResourceMemory, *resource.NewQuantity(b, resource.BinarySI))
		env = append(env, corev1.EnvVar{Name: m.env, Value: strconv.FormatInt(b, 10)})
	}
	for _, c := range []struct {
		v    *float64
		list *corev1.ResourceList
		env  string
	}{{tr.cpuGuarantee, &res.Requests, "CPU_GUARANTEE"}, {tr.cpuLimit, &res.Limits, "CPU_LIMIT"}} {
		if c.v == nil {
			continue
		}
		add(c.list, corev1.ResourceCPU, *resource.NewMilliQuantity(int64(*c.v*1000), resource.DecimalSI))
		env = append(env, corev1.EnvVar{Name: c.env, Value: strconv.FormatFloat(*c.v, 'f', -1, 64)})
	}
	for src, list := range map[*map[string]string]*corev1.ResourceList{&tr.extraResourceLimits: &res.Limits, &tr.extraResourceGuarantee: &res.Requests} {
		for k, s := range *src {
			q, err := resource.ParseQuantity(s)
			if err != nil {
				return res, nil, fmt.Errorf("extra resource %s %q: %w", k, s, err)
			}
			add(list, corev1.ResourceName(k), q)
		}
	}
	slices.SortFunc(env, func(a, b corev1.EnvVar) int { return strings.Compare(a.Name, b.Name) })
	return res, env, nil
}

// matchNodePurpose sets the node affinity of scheduling.userPods.nodeAffinity.matchNodePurpose.
func matchNodePurpose(pod *corev1.Pod, v *Z2JHValues) error {
	switch purpose := v.Scheduling.UserPods.NodeAffinity.MatchNodePurpose; purpose {
	case "", "prefer", "require":
		term := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: "hub.jupyter.org/node-purpose", Operator: corev1.NodeSelectorOpIn, Values: []string{"user"}}}}
		if purpose == "require" {
			pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}}}
		} else {
			pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: term}}}}
		}
	case "ignore":
	default:
		return fmt.Errorf("scheduling.userPods.nodeAffinity.matchNodePurpose %q", purpose)
	}
	return nil
}

// addCloudMetadataBlock adds the init container that blocks the cloud metadata endpoint.
func addCloudMetadataBlock(pod *corev1.Pod, v *Z2JHValues) {
	if ptr.Deref(v.Singleuser.CloudMetadata.BlockWithIptables, true) {
		ip := v.Singleuser.CloudMetadata.IP
		if ip == "" {
			ip = "169.254.169.254"
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{
			Name:    "block-cloud-metadata",
			Image:   "quay.io/jupyterhub/k8s-network-tools:" + Z2JHChartVersion,
			Command: []string{"iptables", "-A", "OUTPUT", "-d", ip, "-j", "DROP"},
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true), RunAsUser: ptr.To[int64](0),
				Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}},
		})
	}
}

// addHomeVolume mounts the home directory's claim (dynamic storage, z2jh's default).
func addHomeVolume(pod *corev1.Pod, v *Z2JHValues, o NotebookOptions, userServer string) {
	if st := v.Singleuser.Storage.Type; (st == "" || st == "dynamic") && !o.NoHomeVolume {
		home := v.Singleuser.Storage.HomeMountPath
		if home == "" {
			home = "/home/jovyan"
		}
		pod.Spec.Volumes = []corev1.Volume{{Name: "volume-" + userServer, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim-" + userServer}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "volume-" + userServer, MountPath: home}}
	}
}

// RenderHomeClaim renders the home directory's PersistentVolumeClaim that KubeSpawner creates
// before the notebook pod when singleuser.storage.type is dynamic (z2jh's default): claim-<user>,
// singleuser.storage.capacity (10Gi), storageAccessModes (ReadWriteOnce), and the class of
// storage.dynamic.storageClass, the cluster's default class when unset. It returns nil when the
// values ask for no dynamic storage.
func RenderHomeClaim(v *Z2JHValues, o NotebookOptions) (*corev1.PersistentVolumeClaim, error) {
	su := v.Singleuser
	if st := su.Storage.Type; st != "" && st != "dynamic" {
		return nil, nil
	}
	userServer := o.User
	if o.ServerName != "" {
		userServer += "--" + o.ServerName
	}
	capacity := su.Storage.Capacity
	if capacity == "" {
		capacity = "10Gi"
	}
	size, err := resource.ParseQuantity(capacity)
	if err != nil {
		return nil, fmt.Errorf("singleuser.storage.capacity %q: %w", capacity, err)
	}
	modes := su.Storage.Dynamic.StorageAccessModes
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim-" + userServer, Namespace: o.Namespace, Labels: map[string]string{
			"app": "jupyterhub", "app.kubernetes.io/name": "jupyterhub", "component": "singleuser-storage",
			"hub.jupyter.org/username": o.User, "hub.jupyter.org/servername": o.ServerName,
		}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      modes,
			StorageClassName: su.Storage.Dynamic.StorageClass,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}, nil
}
