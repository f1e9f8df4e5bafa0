package dashboard

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// dayOfEvents returns n events of a team of 10 agents spread evenly over
// a day from start: each task is created, claimed, worked under a lock
// and finished (one in ten fails, one in twenty is released), with a
// conflict every 50 events and a denial every 200; and the tasks'
// records at the end (a day cut short leaves its last task where it was).
func dayOfEvents(n int, start time.Time) ([]workspace.Event, map[string]workspace.Task) {
	evs := make([]workspace.Event, 0, n)
	recs := map[string]workspace.Task{}
	step := 24 * time.Hour / time.Duration(n)
	at := func() time.Time { return start.Add(time.Duration(len(evs)) * step) }
	actors := make([]string, 10)
	for i := range actors {
		actors[i] = fmt.Sprintf("agent-%02d", i)
	}
	for t := 0; len(evs) < n; t++ {
		id, title := fmt.Sprintf("task-%07d", t), fmt.Sprintf("task number %d", t)
		task := workspace.Subject{Kind: workspace.SubjectTask, ID: id, Name: title}
		res := fmt.Sprintf("file:src/pkg%03d/main.go", t%400)
		lock := workspace.Subject{Kind: workspace.SubjectLock, ID: res, Name: res}
		who := actors[t%len(actors)]
		end, status := workspace.Event{Type: workspace.EventTaskUpdated, Message: "done"}, workspace.TaskDone
		switch {
		case t%20 == 0:
			end, status = workspace.Event{Type: workspace.EventTaskReleased, Message: "status pending"}, workspace.TaskPending
		case t%10 == 0:
			status = workspace.TaskFailed
		}
		version := int64(0)
		day := []workspace.Event{
			{Actor: "planner", Type: workspace.EventTaskCreated},
			{Actor: who, Type: workspace.EventTaskClaimed, Message: "attempt 1"},
		}
		if t%3 == 0 {
			// Every third lock was held by another agent: a wait of up
			// to about 3 s.
			day = append(day, workspace.Event{Actor: who, Type: workspace.EventLockWaited, Subject: lock,
				Message: (time.Duration(t%17) * 173 * time.Millisecond).String()})
		}
		for _, e := range append(day, []workspace.Event{
			{Actor: who, Type: workspace.EventLockAcquired, Subject: lock},
			{Actor: who, Type: workspace.EventTaskUpdated, Message: "heartbeat"},
			{Actor: who, Type: workspace.EventLockReleased, Subject: lock},
			{Actor: who, Type: end.Type, Message: end.Message},
		}...) {
			if e.Subject.Kind == "" {
				e.Subject = task
				version++
				e.Version = version
				now := workspace.TaskInProgress
				switch {
				case e.Type == workspace.EventTaskCreated:
					now = workspace.TaskPending
				case e.Type == end.Type && e.Message == end.Message:
					now = status
				}
				if len(evs) < n {
					recs[id] = workspace.Task{ID: id, Title: title, Status: now, Version: version}
				}
			}
			e.Seq, e.Time = int64(len(evs)+1), at()
			evs = append(evs, e)
			k := len(evs)
			if k%50 == 0 {
				evs = append(evs, workspace.Event{Seq: int64(len(evs) + 1), Time: at(), Actor: who, Type: workspace.EventConflict,
					Subject: workspace.Subject{Kind: workspace.SubjectArtifact, ID: "a", Name: fmt.Sprintf("docs/page%02d.md", t%30)}, Message: "expected version 3, current is 4"})
			}
			if k%200 == 0 {
				evs = append(evs, workspace.Event{Seq: int64(len(evs) + 1), Time: at(), Actor: who, Type: workspace.EventDenied,
					Subject: workspace.Subject{Kind: workspace.SubjectPolicy, ID: "artifacts.update", Name: "secrets/prod.env"}, Message: "role worker may not write"})
			}
		}
	}
	return evs[:n], recs
}

// flowBenchSizes are the day sizes BenchmarkFlow measures: a day of a
// busy team, and the bound one view reads (maxScan). docs/dashboard.md
// tabulates both (TestDocsStateTheFlowBounds).
var flowBenchSizes = []int{10_000, maxScan}

// BenchmarkFlow computes the timeline's and the charts' flow (one pass,
// flow.add per event, then finish and the queue depth) over a day of n
// events: the work a timeline or charts page does beyond reading the log.
func BenchmarkFlow(b *testing.B) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, n := range flowBenchSizes {
		evs, recs := dayOfEvents(n, start)
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				f := newFlow(start, start.Add(24*time.Hour))
				for _, e := range evs {
					f.add(e)
				}
				f.settleBy(recs)
				f.finish()
				f.depthFrom(map[workspace.TaskStatus]int{workspace.TaskPending: 5})
				if f.Events != n {
					b.Fatalf("flow saw %d events of %d", f.Events, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/event")
			// The process's CPU time per pass: on a shared machine the
			// wall time also counts the time other work held the cores.
			b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

func TestFlowOfADay(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	evs, recs := dayOfEvents(10_000, start)
	f := newFlow(start, start.Add(24*time.Hour))
	for _, e := range evs {
		f.add(e)
	}
	f.settleBy(recs)
	f.finish()
	f.depthFrom(map[workspace.TaskStatus]int{})
	done, failed, conflicts, denials := 0, 0, 0, 0
	for _, b := range f.Buckets {
		done, failed, conflicts, denials = done+b.Done, failed+b.Failed, conflicts+b.Conflicts, denials+b.Denials
	}
	// 10,000 events: 6 per task plus the collisions, so about 1,630 tasks.
	if done < 1300 || failed < 70 || conflicts < 190 || denials < 45 {
		t.Fatalf("done %d failed %d conflicts %d denials %d", done, failed, conflicts, denials)
	}
	if len(f.bars) < 3000 || f.Dropped != 0 {
		t.Fatalf("bars %d dropped %d: want every attempt and hold", len(f.bars), f.Dropped)
	}
	top := f.top(3)
	if len(top) != 3 || top[0].Subject != "policy:secrets/prod.env" || top[0].Denials < 45 {
		t.Fatalf("top contention %+v", top[0])
	}
	last := f.Buckets[flowBuckets-1]
	if last.Running < 0 || last.Ready < 0 {
		t.Fatalf("negative depth %+v", last)
	}
}

func TestFlowKeepsAtMostMaxBars(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newFlow(start, start.Add(24*time.Hour))
	evs, recs := dayOfEvents(30_000, start)
	for _, e := range evs {
		f.add(e)
	}
	f.settleBy(recs)
	f.finish()
	if len(f.bars) != maxBars || f.Dropped < 5000 {
		t.Fatalf("bars %d dropped %d: want the cap and a count past it", len(f.bars), f.Dropped)
	}
}
