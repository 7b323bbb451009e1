// Package kubeapi runs real kube-apiservers on etcd members the way kubeadm does (each
// master's apiserver on its own local member through --etcd-servers) and connects to them:
// the flags, the credentials they need (a token for an admin in system:masters, a
// service-account signing key), a kubeconfig for operators, and readiness as /readyz says it.
//
// The binary itself is built from the module proxy and cached by internal/etcdbin
// (KubeAPIServerPath); processes are started and stopped by whoever owns them (the sandbox,
// a kubelet double).
package kubeapi
