package fakeclock

import (
	"testing"
	"time"
)

func TestTimersFireWhenAdvancedPastTheirDeadline(t *testing.T) {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	c := New(start)
	short, long := c.NewTimer(time.Second), c.NewTimer(time.Minute)
	stopped := c.NewTimer(2 * time.Second)
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop of a pending timer reports true once, then false")
	}
	if c.Waiters() != 2 {
		t.Fatalf("%d waiters, want 2", c.Waiters())
	}
	if d, ok := c.NextDeadline(); !ok || !d.Equal(start.Add(time.Second)) {
		t.Fatalf("next deadline %v %v", d, ok)
	}
	c.Advance(999 * time.Millisecond)
	select {
	case <-short.C():
		t.Fatal("fired early")
	default:
	}
	c.Advance(time.Millisecond)
	if at := <-short.C(); !at.Equal(start.Add(time.Second)) {
		t.Fatalf("fired with %v", at)
	}
	if short.Stop() {
		t.Fatal("Stop of a fired timer reports true")
	}
	select {
	case <-stopped.C():
		t.Fatal("a stopped timer fired")
	case <-long.C():
		t.Fatal("fired early")
	default:
	}
	c.Advance(time.Hour)
	<-long.C()
	if !c.Now().Equal(start.Add(time.Hour+time.Second)) || c.Waiters() != 0 {
		t.Fatalf("now %v, %d waiters", c.Now(), c.Waiters())
	}
	if z := c.NewTimer(0); z.Stop() {
		t.Fatal("a zero timer is already fired")
	}
}

func TestWaitForWaiters(t *testing.T) {
	c := New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	if c.WaitForWaiters(1, time.Millisecond) {
		t.Fatal("no timer, yet WaitForWaiters said there was one")
	}
	go c.NewTimer(time.Second)
	if !c.WaitForWaiters(1, 10*time.Second) {
		t.Fatal("timer made by another goroutine not seen")
	}
}
