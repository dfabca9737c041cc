// Package agenterr tells core which agent-server failures are worth
// retrying: it turns an agentclient error of class retryable (422, 429,
// 5xx, the network) into a *core.Error of KindRateLimited (429) or
// KindUnavailable carrying the server's Retry-After, so core's retry
// treats it as transient. Every other error is returned as it is.
package agenterr

import (
	"errors"
	"net/http"

	"github.com/canvasapp/companion/agentclient"
	"github.com/canvasapp/companion/core"
)

// Classify returns err as core should see it.
func Classify(err error) error {
	var ae *agentclient.Error
	if err == nil || !errors.As(err, &ae) || ae.Class != agentclient.ClassRetryable {
		return err
	}
	kind := core.KindUnavailable
	if ae.Status == http.StatusTooManyRequests {
		kind = core.KindRateLimited
	}
	return &core.Error{Kind: kind, Message: err.Error(), RetryAfter: ae.RetryAfter, Err: err}
}
