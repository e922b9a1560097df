package control_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/control"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
)

// A question goes to one of the instances answering its topic, and is
// answered once; with none answering, the asker hears so at once instead of
// waiting out its time.
func TestAQuestionHasOneAnswerer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := control.New(eventlogtest.Open(t, domain.Sandbox))

	start := time.Now()
	if _, err := l.Ask(ctx, "question", []byte("anyone?")); !errors.Is(err, control.ErrNoAnswerer) {
		t.Fatalf("asking with no answerer: %v, want ErrNoAnswerer", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("asking with no answerer took %s", waited)
	}

	// Two answerers, as two instances would be.
	var calls [2]atomic.Int64
	for i := range calls {
		stop, err := l.Answer("question", func(data []byte, answer func([]byte)) {
			calls[i].Add(1)
			go answer(append([]byte(strconv.Itoa(i)+":"), data...))
		})
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
	}
	const questions = 40
	for n := range questions {
		got, err := l.Ask(ctx, "question", []byte(strconv.Itoa(n)))
		if err != nil {
			t.Fatalf("question %d: %v", n, err)
		}
		if want0, want1 := "0:"+strconv.Itoa(n), "1:"+strconv.Itoa(n); string(got) != want0 && string(got) != want1 {
			t.Fatalf("question %d answered %q", n, got)
		}
	}
	if total := calls[0].Load() + calls[1].Load(); total != questions {
		t.Errorf("%d questions reached the answerers %d + %d times, want once each", questions, calls[0].Load(), calls[1].Load())
	}
	// Another topic has no answerer.
	if _, err := l.Ask(ctx, "other", nil); !errors.Is(err, control.ErrNoAnswerer) {
		t.Errorf("asking on a topic nobody answers: %v", err)
	}
}
