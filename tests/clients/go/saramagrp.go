// saramagrp: one consumer-group member using Debian's sarama 1.22.1 (github.com/Shopify/sarama).
//
//	saramagrp BOOTSTRAP TOPIC GROUP SECONDS [KAFKA_VERSION]
//
// KAFKA_VERSION defaults to 2.1.0 (JoinGroup v1, no ApiVersions). SECONDS=0 runs until stdin
// closes or SIGTERM/SIGINT. Prints one JSON object per line on stdout (see ../README.md); sarama's
// own log goes to stderr. Exit 0 when no error event was printed, 1 otherwise.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/ioutil"
	"log"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/Shopify/sarama"
)

var (
	outMu      sync.Mutex
	errCount   int
	assignment = []string{}
)

// emit prints {"event":EVENT,"k1":v1,...} on one line, keys in the given order.
func emit(event string, kv ...interface{}) {
	line := `{"event":` + toJSON(event)
	for i := 0; i+1 < len(kv); i += 2 {
		line += "," + toJSON(kv[i]) + ":" + toJSON(kv[i+1])
	}
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Println(line + "}")
}

func toJSON(v interface{}) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func emitError(kind string, err error) {
	outMu.Lock()
	errCount++
	outMu.Unlock()
	emit("error", "type", kind, "message", err.Error())
}

func claimList(claims map[string][]int32) []string {
	out := []string{}
	for topic, parts := range claims {
		for _, p := range parts {
			out = append(out, topic+"-"+strconv.Itoa(int(p)))
		}
	}
	sort.Strings(out)
	return out
}

type handler struct{}

func (handler) Setup(s sarama.ConsumerGroupSession) error {
	parts := claimList(s.Claims())
	outMu.Lock()
	assignment = parts
	outMu.Unlock()
	emit("assigned", "partitions", parts,
		"generation", s.GenerationID(), "member_id", s.MemberID())
	return nil
}

func (handler) Cleanup(s sarama.ConsumerGroupSession) error {
	// the summary keeps the last assignment (Setup replaces it on the next session)
	emit("revoked", "partitions", claimList(s.Claims()))
	return nil
}

func (handler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		s.MarkMessage(msg, "")
	}
	return nil
}

func main() {
	if len(os.Args) < 5 {
		fmt.Fprintln(os.Stderr, "usage: saramagrp BOOTSTRAP TOPIC GROUP SECONDS [KAFKA_VERSION]")
		os.Exit(2)
	}
	bootstrap, topic, group := os.Args[1], os.Args[2], os.Args[3]
	seconds, err := strconv.Atoi(os.Args[4])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad SECONDS:", err)
		os.Exit(2)
	}
	version := sarama.V2_1_0_0
	if len(os.Args) > 5 {
		if version, err = sarama.ParseKafkaVersion(os.Args[5]); err != nil {
			fmt.Fprintln(os.Stderr, "bad KAFKA_VERSION:", err)
			os.Exit(2)
		}
	}
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags)

	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = "sarama-saramagrp"
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sigs; cancel() }()
	if seconds > 0 {
		time.AfterFunc(time.Duration(seconds)*time.Second, cancel)
	} else {
		go func() { io.Copy(ioutil.Discard, os.Stdin); cancel() }()
	}

	cg, err := sarama.NewConsumerGroup([]string{bootstrap}, group, cfg)
	if err != nil {
		emitError(fmt.Sprintf("%T", err), err)
		emit("summary", "polls", 0, "errors", errCount, "assignment", assignment)
		os.Exit(1)
	}
	go func() {
		for e := range cg.Errors() {
			emitError(fmt.Sprintf("%T", e), e)
		}
	}()
	emit("ready")

	polls := 0
	for ctx.Err() == nil {
		polls++ // one Consume call = one group session (join, sync, consume until rebalance)
		if err := cg.Consume(ctx, []string{topic}, handler{}); err != nil && ctx.Err() == nil {
			emitError(fmt.Sprintf("%T", err), err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	if err := cg.Close(); err != nil {
		emitError(fmt.Sprintf("%T", err), err)
	}
	outMu.Lock()
	n, last := errCount, assignment
	outMu.Unlock()
	emit("summary", "polls", polls, "errors", n, "assignment", last)
	if n > 0 {
		os.Exit(1)
	}
}
