package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"sync"
)

// Upstream publishes each event of a conversation, and each bash event, to
// a PubSub (pub_sub.py) of at most 50 subscribers (event_service.py,
// bash_service.py). A conversation's own bookkeeping subscribers count
// toward that limit, so its sockets get fewer than 50 places.
const maxSubscribers = 50

// errTooManySubscribers is upstream's MaxSubscribersError.
var errTooManySubscribers = errors.New("subscriber limit reached")

// subscriber receives published frames. It must not block: a socket
// queues them for its own writer.
type subscriber interface {
	deliver(frame []byte)
}

// pubsub fans frames out to its subscribers.
type pubsub struct {
	mu       sync.Mutex
	internal int // places the server's own subscribers take
	subs     map[subscriber]struct{}
}

func newPubSub(internal int) *pubsub {
	return &pubsub{internal: internal, subs: map[subscriber]struct{}{}}
}

func (p *pubsub) subscribe(s subscriber) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.internal+len(p.subs) >= maxSubscribers {
		return errTooManySubscribers
	}
	p.subs[s] = struct{}{}
	return nil
}

func (p *pubsub) unsubscribe(s subscriber) {
	p.mu.Lock()
	delete(p.subs, s)
	p.mu.Unlock()
}

func (p *pubsub) publish(frame []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.subs {
		s.deliver(frame)
	}
}

// clear drops every subscriber, as closing a conversation's event service
// does; their sockets stay open but hear nothing more.
func (p *pubsub) clear() {
	p.mu.Lock()
	clear(p.subs)
	p.mu.Unlock()
}

// compactJSON is Starlette's send_json: json.dumps with no spaces, and
// with <, > and & left as they are.
func compactJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// withoutNone drops null members of every object, as pydantic's
// model_dump(exclude_none=True) does for the models an event is made of.
func withoutNone(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if x != nil {
				out[k] = withoutNone(x)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = withoutNone(x)
		}
		return out
	case json.RawMessage:
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber() // numbers go out as they came
		var x any
		if err := dec.Decode(&x); err != nil {
			return v
		}
		return withoutNone(x)
	}
	return v
}

// eventFrame is the text frame an event goes out as on the events socket.
func eventFrame(ev map[string]any) ([]byte, error) {
	return compactJSON(withoutNone(ev))
}
