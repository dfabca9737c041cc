package exportstore

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// Credentials are a bucket's keys as companion keeps them in its secret
// store (never in the database in plain text, never in a log): S3 keys,
// or a Google service account key. They override the platform's chains.
type Credentials struct {
	AccessKeyID     string `json:"access_key_id,omitempty"`
	SecretAccessKey string `json:"secret_access_key,omitempty"`
	SessionToken    string `json:"session_token,omitempty"`
	// GoogleCredentialsJSON is a service account key file's content.
	GoogleCredentialsJSON json.RawMessage `json:"google_credentials_json,omitempty"`
}

// CredentialsKey is the secret store's key for the keys of the bucket a
// store URL names: one per scheme and bucket, whatever the prefix and
// parameters, so the keys follow the bucket and no other.
func CredentialsKey(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", badURL("export store URL does not parse: %v", redactURLError(err))
	}
	switch u.Scheme {
	case "s3", "gs":
	default:
		return "", badURL("only s3:// and gs:// stores take keys, not %q", u.Scheme)
	}
	if u.Host == "" {
		return "", badURL("export store URL %s://%s names no bucket", u.Scheme, u.Path)
	}
	return credentialsKeyPrefix + u.Scheme + "://" + u.Host, nil
}

// credentialsKeyPrefix begins every CredentialsKey.
const credentialsKeyPrefix = "export-store:"

// KeyBucket is the bucket ("s3://name") a CredentialsKey names, for
// messages.
func KeyBucket(key string) string { return strings.TrimPrefix(key, credentialsKeyPrefix) }

// redactURLError drops the URL a url.Error carries (it may hold keys).
func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// ParseCredentials reads keys for the store rawURL names, as a person
// gives them: for s3://, NAME=VALUE lines AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and optionally AWS_SESSION_TOKEN (the names of
// the AWS environment); for gs://, a service account key file (JSON).
// Errors never quote a value.
func ParseCredentials(rawURL string, input []byte) (Credentials, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return Credentials{}, badURL("export store URL does not parse: %v", redactURLError(err))
	}
	in := strings.TrimSpace(string(input))
	switch u.Scheme {
	case "gs":
		var key struct {
			Type        string `json:"type"`
			ClientEmail string `json:"client_email"`
			PrivateKey  string `json:"private_key"`
		}
		if err := json.Unmarshal([]byte(in), &key); err != nil || key.Type == "" {
			return Credentials{}, fmt.Errorf("a gs:// store takes a Google service account key file (JSON, as the console downloads it) on stdin; what was given is not one")
		}
		return Credentials{GoogleCredentialsJSON: json.RawMessage(in)}, nil
	case "s3":
		var c Credentials
		for line := range strings.Lines(in) {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			k, v = strings.TrimSpace(strings.TrimPrefix(k, "export ")), strings.TrimSpace(v)
			switch {
			case !ok:
				return Credentials{}, fmt.Errorf("an s3:// store takes NAME=VALUE lines on stdin (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, optionally AWS_SESSION_TOKEN); a line has no '='")
			case k == "AWS_ACCESS_KEY_ID":
				c.AccessKeyID = v
			case k == "AWS_SECRET_ACCESS_KEY":
				c.SecretAccessKey = v
			case k == "AWS_SESSION_TOKEN":
				c.SessionToken = v
			default:
				return Credentials{}, fmt.Errorf("an s3:// store takes AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, not %q", k)
			}
		}
		if c.AccessKeyID == "" || c.SecretAccessKey == "" {
			return Credentials{}, fmt.Errorf("an s3:// store needs both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY on stdin, as NAME=VALUE lines")
		}
		return c, nil
	}
	return Credentials{}, badURL("only s3:// and gs:// stores take keys, not %q", u.Scheme)
}

// Options returns o with these credentials in it.
func (c Credentials) Options(o Options) Options {
	o.AccessKeyID, o.SecretAccessKey, o.SessionToken = c.AccessKeyID, c.SecretAccessKey, c.SessionToken
	if len(c.GoogleCredentialsJSON) > 0 {
		o.GoogleCredentialsJSON = []byte(c.GoogleCredentialsJSON)
	}
	return o
}

// Describe says which keys these are without revealing a secret: the
// access key id, or the service account's e-mail.
func (c Credentials) Describe() string {
	if c.AccessKeyID != "" {
		return "S3 access key " + c.AccessKeyID
	}
	var key struct {
		ClientEmail string `json:"client_email"`
	}
	if json.Unmarshal(c.GoogleCredentialsJSON, &key) == nil && key.ClientEmail != "" {
		return "Google service account " + key.ClientEmail
	}
	return "a Google service account key"
}
