package harness

// IsWriteVerb reports whether verb, an apiserver_request_total verb label,
// is a request that changes something. The API server reports the HTTP
// method for most writes, and CREATE or UPDATE where its handler names the
// action (k8s.io/apiserver's validRequestMethods); both count.
func IsWriteVerb(verb string) bool {
	switch verb {
	case "POST", "PUT", "PATCH", "APPLY", "CREATE", "UPDATE", "DELETE", "DELETECOLLECTION":
		return true
	}
	return false
}

// ResourceKey names an API resource the way the write tables do: "jobs",
// "tasks/status", "events".
func ResourceKey(resource, subresource string) string {
	if subresource == "" {
		return resource
	}
	return resource + "/" + subresource
}
