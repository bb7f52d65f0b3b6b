package httprunner

import (
	"encoding/json"
	"net/textproto"
	"net/url"
	"sort"
	"strings"
)

// Mask replaces every sensitive value and every URL query value in the
// output.
const Mask = "***"

// redactor replaces sensitive header values with Mask. Secrets reach the
// runner only through environment variables filled by the kubelet; the
// runner's output is what ends up in the Task status and in logs, so this is
// the one place where a secret could leak out of the Secret.
//
// Servers echo headers back in many shapes (a debugging endpoint returning
// the request as JSON, an error page quoting the query string), so each value
// is also masked in its common encodings, not only verbatim.
// minMaskedWord is the length from which a word of a multi-word secret is
// masked on its own.
const minMaskedWord = 8

type redactor struct {
	forms    []string // longest first
	replacer *strings.Replacer
}

func newRedactor(secrets []string) *redactor {
	seen := map[string]bool{}
	var forms []string
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			forms = append(forms, s)
		}
	}
	for _, v := range secrets {
		// Besides the whole value, mask its long whitespace-separated
		// words: HTTP parsers split on spaces, so an error about a
		// malformed response quotes a word of it ("malformed HTTP status
		// code \"<word>\""), and a Bearer token is a word of its header.
		// Short words ("Bearer", "Basic") are not secret on their own.
		variants := []string{v, textproto.TrimString(v)}
		if words := strings.Fields(v); len(words) > 1 {
			for _, w := range words {
				if len(w) >= minMaskedWord {
					variants = append(variants, w)
				}
			}
		}
		for _, s := range variants {
			add(s)
			add(url.QueryEscape(s))
			add(url.PathEscape(s))
			add(jsonEscape(s, true))
			add(jsonEscape(s, false))
		}
	}
	if len(forms) == 0 {
		return nil
	}
	// strings.Replacer tries the old strings in argument order at each
	// position, so longest first makes a secret that contains another one
	// disappear whole instead of leaving its remainder visible.
	sort.SliceStable(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Mask)
	}
	return &redactor{forms: forms, replacer: strings.NewReplacer(pairs...)}
}

// jsonEscape is s as it appears inside a JSON string, with or without the
// HTML escaping (\u003c for <) that Go's encoder applies by default.
func jsonEscape(s string, escapeHTML bool) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(s); err != nil {
		return ""
	}
	out := strings.TrimSuffix(b.String(), "\n")
	return strings.TrimSuffix(strings.TrimPrefix(out, `"`), `"`)
}

// String masks every secret in s. A nil redactor (no sensitive headers)
// returns s unchanged.
func (r *redactor) String(s string) string {
	if r == nil {
		return s
	}
	return r.replacer.Replace(s)
}

// Excerpt masks the secrets in a body excerpt. When the excerpt was cut
// (the body goes on), a secret may straddle the cut: its beginning is in the
// excerpt and would escape the verbatim match, so any tail that could be the
// start of a secret is dropped too.
func (r *redactor) Excerpt(b []byte, truncated bool) []byte {
	if r == nil {
		return b
	}
	s := r.String(string(b))
	if truncated {
		cut := 0
		for _, f := range r.forms {
			for k := min(len(f)-1, len(s)); k > cut; k-- {
				if strings.HasSuffix(s, f[:k]) {
					cut = k
					break
				}
			}
		}
		s = s[:len(s)-cut]
	}
	return []byte(s)
}

// displayURL is the request's URL as printed: DisplayURL, or for a URL
// from a Secret only its scheme and host.
func (r Request) displayURL() string {
	if r.SensitiveURL && r.URL != nil {
		return r.URL.Scheme + "://" + r.URL.Host + "/" + Mask
	}
	return DisplayURL(r.URL)
}

// DisplayURL is u as the runner prints it: without userinfo (a password) and
// fragment, with every query value replaced by Mask but the parameter names
// kept (`?token=***&page=***`), so the user recognises the endpoint without
// the output carrying tokens that are often passed in query strings.
func DisplayURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	var b strings.Builder
	if u.Scheme != "" {
		b.WriteString(u.Scheme)
		b.WriteString("://")
	}
	b.WriteString(u.Host)
	if u.Opaque != "" {
		b.WriteString(u.Opaque)
	} else {
		b.WriteString(u.EscapedPath())
	}
	if u.RawQuery != "" || u.ForceQuery {
		b.WriteByte('?')
		b.WriteString(redactQuery(u.RawQuery))
	}
	return b.String()
}

// redactQuery masks the values of a raw query, keeping names and order. It
// splits on '&' only: a ';' stays inside the masked value, which errs on the
// side of hiding.
func redactQuery(raw string) string {
	if raw == "" {
		return ""
	}
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		if name, value, ok := strings.Cut(p, "="); ok && value != "" {
			parts[i] = name + "=" + Mask
		}
	}
	return strings.Join(parts, "&")
}
