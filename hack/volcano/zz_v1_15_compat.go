// Overlay for volcano.sh/apis v1.14.0 so volcano.sh/volcano v1.15.1 builds from the Go module proxy,
// which serves volcano.sh/apis v1.14.0 but not v1.15.x. v1.14.0 -> v1.15.0 adds exactly this Go
// constant to the API (the rest is comments and regenerated clients). Copied into the module by
// hack/build-control-plane.sh; remove when the proxy serves volcano.sh/apis at VOLCANO_VERSION.
package v1beta1

const QueueAllocationGateKey = GroupName + "/queue-allocation-gate"
