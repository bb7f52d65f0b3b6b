package v1alpha1

import "k8s.io/apimachinery/pkg/api/resource"

// The pod fields a Task passes through (spec.affinity, spec.tolerations,
// the sources of spec.volumes) have the JSON shape of their core/v1
// namesakes, so any manifest written for a pod fits, but every list,
// string and map in them is bounded here: the core/v1 types carry no
// bounds, and a schema without them let one Task carry about 1.4 MiB of
// nested lists (CEL rules cannot bound them, since the API server
// estimates a rule's cost from the schema's own bounds). internal/jobs
// converts them to core/v1 field for field.

// LabelKeyMaxLength is the longest label key: a DNS subdomain prefix (253),
// a slash and a name (63).
const LabelKeyMaxLength = 317

// Affinity is a pod's affinity (core/v1 Affinity) with bounded lists.
type Affinity struct {
	// +optional
	NodeAffinity *NodeAffinity `json:"nodeAffinity,omitempty"`
	// +optional
	PodAffinity *PodAffinity `json:"podAffinity,omitempty"`
	// +optional
	PodAntiAffinity *PodAffinity `json:"podAntiAffinity,omitempty"`
}

// NodeAffinity is core/v1 NodeAffinity.
type NodeAffinity struct {
	// +optional
	RequiredDuringSchedulingIgnoredDuringExecution *NodeSelector `json:"requiredDuringSchedulingIgnoredDuringExecution,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	PreferredDuringSchedulingIgnoredDuringExecution []PreferredSchedulingTerm `json:"preferredDuringSchedulingIgnoredDuringExecution,omitempty"`
}

// NodeSelector is core/v1 NodeSelector.
type NodeSelector struct {
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	NodeSelectorTerms []NodeSelectorTerm `json:"nodeSelectorTerms"`
}

// PreferredSchedulingTerm is core/v1 PreferredSchedulingTerm.
type PreferredSchedulingTerm struct {
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`
	// +required
	Preference NodeSelectorTerm `json:"preference"`
}

// NodeSelectorTerm is core/v1 NodeSelectorTerm.
type NodeSelectorTerm struct {
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	MatchExpressions []NodeSelectorRequirement `json:"matchExpressions,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1
	MatchFields []NodeFieldSelectorRequirement `json:"matchFields,omitempty"`
}

// NodeSelectorRequirement is core/v1 NodeSelectorRequirement.
type NodeSelectorRequirement struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// +required
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist;Gt;Lt
	Operator string `json:"operator"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	Values []string `json:"values,omitempty"`
}

// NodeFieldSelectorRequirement is core/v1 NodeSelectorRequirement in
// matchFields, whose values are node names.
type NodeFieldSelectorRequirement struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// +required
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist;Gt;Lt
	Operator string `json:"operator"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=253
	Values []string `json:"values,omitempty"`
}

// PodAffinity is core/v1 PodAffinity (and PodAntiAffinity, of the same
// shape).
type PodAffinity struct {
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=2
	RequiredDuringSchedulingIgnoredDuringExecution []PodAffinityTerm `json:"requiredDuringSchedulingIgnoredDuringExecution,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=2
	PreferredDuringSchedulingIgnoredDuringExecution []WeightedPodAffinityTerm `json:"preferredDuringSchedulingIgnoredDuringExecution,omitempty"`
}

// WeightedPodAffinityTerm is core/v1 WeightedPodAffinityTerm.
type WeightedPodAffinityTerm struct {
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`
	// +required
	PodAffinityTerm PodAffinityTerm `json:"podAffinityTerm"`
}

// PodAffinityTerm is core/v1 PodAffinityTerm.
type PodAffinityTerm struct {
	// +optional
	LabelSelector *LabelSelector `json:"labelSelector,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	TopologyKey string `json:"topologyKey"`
	// +optional
	NamespaceSelector *LabelSelector `json:"namespaceSelector,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=317
	MatchLabelKeys []string `json:"matchLabelKeys,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=317
	MismatchLabelKeys []string `json:"mismatchLabelKeys,omitempty"`
}

// LabelSelector is meta/v1 LabelSelector.
type LabelSelector struct {
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 317 && self[k].size() <= 63)",message="matchLabels keys must be at most 317 characters and values at most 63 (label keys and values)"
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelectorRequirement is meta/v1 LabelSelectorRequirement.
type LabelSelectorRequirement struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// +required
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator string `json:"operator"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	Values []string `json:"values,omitempty"`
}

// ConfigMapVolumeSource is core/v1 ConfigMapVolumeSource.
type ConfigMapVolumeSource struct {
	// Name of the ConfigMap in the Task's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Items []KeyToPath `json:"items,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=511
	DefaultMode *int32 `json:"defaultMode,omitempty"`
	// +optional
	Optional *bool `json:"optional,omitempty"`
}

// SecretVolumeSource is core/v1 SecretVolumeSource.
type SecretVolumeSource struct {
	// SecretName of the Secret in the Task's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Items []KeyToPath `json:"items,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=511
	DefaultMode *int32 `json:"defaultMode,omitempty"`
	// +optional
	Optional *bool `json:"optional,omitempty"`
}

// KeyToPath is core/v1 KeyToPath.
type KeyToPath struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Path string `json:"path"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=511
	Mode *int32 `json:"mode,omitempty"`
}

// EmptyDirVolumeSource is core/v1 EmptyDirVolumeSource.
type EmptyDirVolumeSource struct {
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Medium string `json:"medium,omitempty"`
	// +optional
	SizeLimit *resource.Quantity `json:"sizeLimit,omitempty"`
}

// PersistentVolumeClaimVolumeSource is core/v1
// PersistentVolumeClaimVolumeSource.
type PersistentVolumeClaimVolumeSource struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName"`
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
}

// Toleration is core/v1 Toleration.
type Toleration struct {
	// +optional
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Operator string `json:"operator,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Value string `json:"value,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Effect string `json:"effect,omitempty"`
	// +optional
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}
