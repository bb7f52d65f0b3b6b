package httprunner

import (
	"net/url"
	"testing"
)

func TestDisplayURLHidesCredentialsAndQueryValues(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"a plain URL is shown as is", "https://example.com/a/b", "https://example.com/a/b"},
		{"userinfo is dropped", "https://user:pass@example.com/", "https://example.com/"},
		{"a user without password is dropped too", "https://user@example.com:8443/x", "https://example.com:8443/x"},
		{"query values are masked and names kept in order", "http://h/p?token=abc&page=2", "http://h/p?token=***&page=***"},
		{"a parameter without value is kept", "http://h/p?flag&x=1", "http://h/p?flag&x=***"},
		{"an empty value stays empty", "http://h/p?x=", "http://h/p?x="},
		{"a semicolon stays inside the masked value", "http://h/?a=1;b=2", "http://h/?a=***"},
		{"repeated parameters are all masked", "http://h/?k=1&k=2", "http://h/?k=***&k=***"},
		{"the fragment is dropped", "http://h/p?x=1#frag", "http://h/p?x=***"},
		{"an escaped path stays escaped", "http://h/a%20b/c", "http://h/a%20b/c"},
		{"an IPv6 host keeps its brackets", "http://[::1]:8080/", "http://[::1]:8080/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := DisplayURL(u); got != tc.want {
				t.Errorf("DisplayURL(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestRedactorMasksSecretsInTheirCommonEncodings(t *testing.T) {
	const secret = `s3cr3t <&> "q"/+`
	red := newRedactor([]string{secret, "", "short"})
	cases := []struct {
		name, in, want string
	}{
		{"verbatim", "a " + secret + " b", "a *** b"},
		{"twice", secret + secret, "******"},
		{"JSON with HTML escaping", `{"k":"s3cr3t \u003c\u0026\u003e \"q\"/+"}`, `{"k":"***"}`},
		{"JSON without HTML escaping", `{"k":"s3cr3t <&> \"q\"/+"}`, `{"k":"***"}`},
		{"query escaped", "?k=s3cr3t+%3C%26%3E+%22q%22%2F%2B", "?k=***"},
		{"path escaped", "/s3cr3t%20%3C&%3E%20%22q%22%2F+", "/***"},
		{"a second secret", "x short y", "x *** y"},
		{"text without secrets is unchanged", "nothing to see", "nothing to see"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := red.String(tc.in); got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestRedactorPrefersTheLongerOfTwoOverlappingSecrets(t *testing.T) {
	red := newRedactor([]string{"abc", "abcdef"})
	if got := red.String("xabcdefx"); got != "x***x" {
		t.Errorf("got %q, want x***x", got)
	}
}

func TestRedactorWithoutSecretsIsNil(t *testing.T) {
	// An empty sensitive value must not turn into "replace the empty
	// string", which would put *** between every two characters.
	red := newRedactor([]string{""})
	if red != nil {
		t.Fatalf("newRedactor of an empty value = %+v, want nil", red)
	}
	if got := red.String("abc"); got != "abc" {
		t.Errorf("nil redactor changed the text: %q", got)
	}
}

func TestExcerptDropsTheBeginningOfASecretCutOffAtTheEnd(t *testing.T) {
	red := newRedactor([]string{"TOKEN-123"})
	cases := []struct {
		name      string
		in        string
		truncated bool
		want      string
	}{
		{"a cut secret's beginning is dropped", "body TOKEN-1", true, "body "},
		{"a single matching character is dropped", "body T", true, "body "},
		{"a whole secret is masked", "body TOKEN-123 more", true, "body *** more"},
		{"an untruncated body keeps its end", "body TOKEN-1", false, "body TOKEN-1"},
		{"a longer beginning is dropped too", "body TOKEN", true, "body "},
		{"text not matching is kept", "body xyz", true, "body xyz"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(red.Excerpt([]byte(tc.in), tc.truncated)); got != tc.want {
				t.Errorf("Excerpt(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
