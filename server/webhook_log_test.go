package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/server"
)

// syncBuffer is a bytes.Buffer a logger and a test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A webhook URL often is a credential (a token in its query or path):
// a failed delivery's log line says why it failed without the URL.
func TestWebhookLogShowsNoURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: the delivery fails
	const token = "Zq9Xw2Lk8Pm4Rt6Yv1Bn3Hc5"
	var logs syncBuffer
	wh, err := server.NewWebhook("http://"+addr+"/hooks/"+token+"?token="+token, make([]byte, 32),
		&server.WebhookOptions{Attempts: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	wh.Notify(context.Background(), contextos.PendingApproval{RunID: "run_1", GateID: "g", RequestedAt: time.Unix(0, 0)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !strings.Contains(logs.String(), "not delivered") && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if err := wh.Close(ctx); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "not delivered") {
		t.Fatalf("no failed delivery logged: %s", out)
	}
	if strings.Contains(out, token) {
		t.Errorf("the log shows the webhook URL's token: %s", out)
	}
}
