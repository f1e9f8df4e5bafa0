package workspace

import (
	"sync"
	"testing"
	"time"
)

// receive waits for the settler's delivery, failing after a generous
// minute (a liveness bound, not a timing assertion).
func receive(t *testing.T, s *settler) {
	t.Helper()
	select {
	case <-s.c:
		s.done()
	case <-time.After(time.Minute):
		t.Fatal("no delivery")
	}
}

// noDelivery checks that nothing more is, or will be, delivered: the
// sleeper has gone (wg) and the channel is empty.
func noDelivery(t *testing.T, s *settler, wg *sync.WaitGroup) {
	t.Helper()
	wg.Wait()
	select {
	case <-s.c:
		t.Fatal("a second delivery")
	default:
	}
}

func TestSettlerDeliversOncePerBurstOfNotifications(t *testing.T) {
	var wg sync.WaitGroup
	s := newSettler(&wg)
	for range 100 {
		s.changed()
	}
	receive(t, s)
	noDelivery(t, s, &wg)

	// A burst longer than maxSettle still ends in one delivery.
	end := time.Now().Add(3 * maxSettle)
	for time.Now().Before(end) {
		s.changed()
		time.Sleep(50 * time.Microsecond)
	}
	receive(t, s)
	noDelivery(t, s, &wg)
}

func TestSettlerDeliversAfterALookAgain(t *testing.T) {
	var wg sync.WaitGroup
	s := newSettler(&wg)
	s.after(2 * settleDelay)
	receive(t, s)
	noDelivery(t, s, &wg)

	// A notification while a look-again is due joins it.
	s.after(4 * settleDelay)
	s.changed()
	receive(t, s)
	noDelivery(t, s, &wg)
}
