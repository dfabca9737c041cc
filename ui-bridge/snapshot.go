package uibridge

import (
	"bytes"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// snapshotReuse is how long one snapshot encoding may be handed to
// clients that connect at its revision. It bounds how old the snapshot's
// server_time can be when a client receives it (paused age is computed
// from it), while a connect storm still shares one encoding.
const snapshotReuse = time.Second

// snapshot is one owner's snapshot message at one revision. The hub
// creates it under its lock (so the item list is exactly the state at rev)
// and the first client to need it encodes it, outside the lock; every
// other client that shares it waits for that one encoding.
type snapshot struct {
	rev   int64
	at    time.Time // the snapshot's server_time
	table bool      // the table form (API.md), else the object form
	items []*entry  // unsorted until encoded

	once      sync.Once
	pm        *websocket.PreparedMessage
	size      int
	err       error
	encodings *atomic.Int64 // the hub's count, for tests and stats
}

// message returns the snapshot prepared for writing, encoding it on
// first use.
func (s *snapshot) message() (*websocket.PreparedMessage, error) {
	s.once.Do(func() {
		sortEntries(s.items)
		var data []byte
		if s.table {
			data = encodeTableSnapshot(s.rev, s.at, s.items)
		} else {
			data = encodeSnapshot(s.rev, s.at, s.items)
		}
		s.items = nil // the encoding is all that is needed now
		s.size = len(data)
		s.pm, s.err = websocket.NewPreparedMessage(websocket.TextMessage, data)
		s.encodings.Add(1)
	})
	return s.pm, s.err
}

// encodeSnapshot assembles a snapshot message from the cached encodings.
func encodeSnapshot(rev int64, now time.Time, items []*entry) []byte {
	n := 128
	for _, e := range items {
		n += len(e.json) + 1
	}
	var b bytes.Buffer
	b.Grow(n)
	b.Write(appendHead(make([]byte, 0, 96), "snapshot", rev, now))
	b.WriteString(`,"workspaces":[`)
	for i, e := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(e.json)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// encodeTableSnapshot assembles a snapshot message in table form from the
// cached rows.
func encodeTableSnapshot(rev int64, now time.Time, items []*entry) []byte {
	n := 128 + len(tableFieldsJSON())
	for _, e := range items {
		n += len(e.row) + 1
	}
	var b bytes.Buffer
	b.Grow(n)
	b.Write(appendHead(make([]byte, 0, 96), "snapshot", rev, now))
	b.WriteString(`,"fields":`)
	b.Write(tableFieldsJSON())
	b.WriteString(`,"rows":[`)
	for i, e := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(e.row)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// prepare makes a stream message ready to be written to many clients.
// It cannot fail for a text message: the error exists for message types
// the library refuses.
func prepare(data []byte) *websocket.PreparedMessage {
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, data)
	if err != nil {
		panic("uibridge: preparing a stream message: " + err.Error())
	}
	return pm
}
