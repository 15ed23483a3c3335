// ClientTool: one Java kafka-clients 4.3.0 consumer for groupd's real-client tests.
//   java -cp <jars>:<classes> ClientTool MODE BOOTSTRAP [key=value ...]
// MODE: assign topic=T seconds=S
//       subscribe topic=T|pattern=RE2 group=G seconds=S [instance=ID] [assignor=range|roundrobin|sticky|cooperative-sticky]
//                 [session.ms=N] [commit=true]          (seconds=0: until stdin closes or SIGTERM)
//                 commit=true: auto-commit off; commitSync() of the positions every second and on revoke
//       commit group=G topic=T partition=P offset=N [metadata=STR]
//       fetch group=G topic=T
// Keys with a dot (e.g. session.timeout.ms=6000) go straight into the consumer config.
// stdout: one JSON object per line (see tests/clients/README.md). Exit 0 iff no error event.
import java.time.Duration;
import java.util.*;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.*;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ClientTool {
    static final Map<String, String> opts = new HashMap<>();
    static KafkaConsumer<byte[], byte[]> consumer;
    static volatile boolean stop = false;
    static int errors = 0, polls = 0;
    static Map<String, Object> lastCommitted = Map.of();
    static boolean commitRetrying = false;
    static final CountDownLatch done = new CountDownLatch(1);

    static void exit(int code) {  // never System.exit while the shutdown hook waits on `done`
        done.countDown();
        if (stop) Runtime.getRuntime().halt(code);
        System.exit(code);
    }

    // ---- tiny JSON writer: String, Number, Boolean, null, Collection, Map ----
    static String json(Object v) {
        if (v == null) return "null";
        if (v instanceof Number || v instanceof Boolean) return v.toString();
        if (v instanceof Collection) {
            StringJoiner j = new StringJoiner(",", "[", "]");
            for (Object o : (Collection<?>) v) j.add(json(o));
            return j.toString();
        }
        if (v instanceof Map) {
            StringJoiner j = new StringJoiner(",", "{", "}");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) j.add(json(String.valueOf(e.getKey())) + ":" + json(e.getValue()));
            return j.toString();
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : v.toString().toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c == '\n') b.append("\\n");
            else if (c == '\r') b.append("\\r");
            else if (c == '\t') b.append("\\t");
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static synchronized void emit(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        System.out.println(json(m));
        System.out.flush();
    }

    static void error(Throwable e) {
        errors++;
        emit("event", "error", "type", e.getClass().getSimpleName(), "message", String.valueOf(e.getMessage()));
    }

    static boolean fatal(Throwable e) {
        return e instanceof AuthenticationException || e instanceof AuthorizationException
            || e instanceof InvalidGroupIdException || e instanceof FencedInstanceIdException
            || e instanceof UnsupportedVersionException || e instanceof IllegalStateException
            || e instanceof InterruptException;
    }

    static List<String> names(Collection<TopicPartition> tps) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : tps) out.add(tp.toString());
        Collections.sort(out);
        return out;
    }

    static String need(String key) {
        String v = opts.get(key);
        if (v == null) { System.err.println("missing " + key + "=..."); exit(2); }
        return v;
    }

    static List<TopicPartition> partitionsOf(String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        for (PartitionInfo p : consumer.partitionsFor(topic)) tps.add(new TopicPartition(topic, p.partition()));
        tps.sort(Comparator.comparingInt(TopicPartition::partition));
        return tps;
    }

    static Map<String, Object> offsetsJson(Map<TopicPartition, OffsetAndMetadata> offsets) {
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            OffsetAndMetadata om = e.getValue();
            out.put(e.getKey().toString(), om == null ? null : Map.of("offset", om.offset(), "metadata", om.metadata()));
        }
        return out;
    }

    static void commitPositions(Collection<TopicPartition> tps) {
        if (tps.isEmpty()) return;
        try {
            Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>();
            for (TopicPartition tp : tps) m.put(tp, new OffsetAndMetadata(consumer.position(tp, Duration.ofSeconds(5)), "java-tool"));
            consumer.commitSync(m);
            Map<String, Object> js = offsetsJson(m);
            if (!js.equals(lastCommitted)) emit("event", "committed", "offsets", js);  // print changes only
            lastCommitted = js;
            commitRetrying = false;
        } catch (WakeupException e) {
            stop = true;
        } catch (RebalanceInProgressException e) {  // normal race: poll() completes the rebalance, retry later
            if (!commitRetrying) emit("event", "commit_retry", "type", e.getClass().getSimpleName(), "message", String.valueOf(e.getMessage()));
            commitRetrying = true;
        } catch (KafkaException e) {
            error(e);
        }
    }

    static void pollLoop(long seconds, boolean commit) {
        long deadline = seconds > 0 ? System.currentTimeMillis() + seconds * 1000 : Long.MAX_VALUE;
        long nextCommit = System.currentTimeMillis() + 1000;
        while (!stop && System.currentTimeMillis() < deadline) {
            try {
                consumer.poll(Duration.ofMillis(200));
                polls++;
            } catch (WakeupException e) {
                break;
            } catch (KafkaException e) {
                error(e);
                if (fatal(e)) break;
                try { Thread.sleep(200); } catch (InterruptedException ie) { break; }
            }
            if (commit && System.currentTimeMillis() >= nextCommit) {
                commitPositions(consumer.assignment());
                nextCommit = System.currentTimeMillis() + 1000;
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: ClientTool assign|subscribe|commit|fetch BOOTSTRAP [key=value ...]");
            System.exit(2);
        }
        String mode = args[0];
        Properties props = new Properties();
        props.put("bootstrap.servers", args[1]);
        props.put("client.id", "java-" + mode);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        for (int i = 2; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq < 0) { System.err.println("bad argument " + args[i]); System.exit(2); }
            opts.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        boolean commit = "true".equals(opts.get("commit"));
        if (opts.containsKey("group")) props.put("group.id", opts.get("group"));
        if (opts.containsKey("instance")) props.put("group.instance.id", opts.get("instance"));
        if (opts.containsKey("session.ms")) props.put("session.timeout.ms", opts.get("session.ms"));
        if (opts.containsKey("assignor")) {
            Map<String, String> cls = Map.of("range", "RangeAssignor", "roundrobin", "RoundRobinAssignor",
                "sticky", "StickyAssignor", "cooperative-sticky", "CooperativeStickyAssignor");
            props.put("partition.assignment.strategy",
                "org.apache.kafka.clients.consumer." + cls.getOrDefault(opts.get("assignor"), opts.get("assignor")));
        }
        if (commit || mode.equals("commit") || mode.equals("fetch")) props.put("enable.auto.commit", "false");
        for (Map.Entry<String, String> e : opts.entrySet())
            if (e.getKey().contains(".") && !e.getKey().equals("session.ms")) props.put(e.getKey(), e.getValue());

        try {
            consumer = new KafkaConsumer<>(props);
        } catch (KafkaException e) {
            error(e);
            emit("event", "summary", "polls", 0, "errors", errors, "assignment", List.of());
            System.exit(1);
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop = true;
            consumer.wakeup();
            try { done.await(); } catch (InterruptedException e) { /* exit */ }
        }));
        emit("event", "ready");
        List<String> lastAssignment = List.of();
        try {
            switch (mode) {
                case "assign": {
                    List<TopicPartition> tps = partitionsOf(need("topic"));
                    consumer.assign(tps);
                    consumer.seekToBeginning(tps);
                    emit("event", "assigned", "partitions", names(tps));
                    pollLoop(Long.parseLong(need("seconds")), false);
                    break;
                }
                case "subscribe": {
                    long seconds = Long.parseLong(need("seconds"));
                    if (seconds == 0) {
                        Thread t = new Thread(() -> {
                            try { while (System.in.read() >= 0) { } } catch (Exception e) { /* closed */ }
                            stop = true;
                            consumer.wakeup();
                        });
                        t.setDaemon(true);
                        t.start();
                    }
                    ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
                        public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                            if (commit) commitPositions(tps);
                            emit("event", "revoked", "partitions", names(tps));
                        }
                        public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                            emit("event", "assigned", "partitions", names(tps), "assignment", names(consumer.assignment()),
                                 "generation", consumer.groupMetadata().generationId(),
                                 "member_id", consumer.groupMetadata().memberId());
                        }
                        public void onPartitionsLost(Collection<TopicPartition> tps) {
                            emit("event", "lost", "partitions", names(tps));
                        }
                    };
                    // pattern=RE2: a regex the server resolves (group.protocol=consumer, KIP-848)
                    if (opts.containsKey("pattern")) consumer.subscribe(new SubscriptionPattern(opts.get("pattern")), listener);
                    else consumer.subscribe(List.of(need("topic")), listener);
                    pollLoop(seconds, commit);
                    break;
                }
                case "commit": {
                    TopicPartition tp = new TopicPartition(need("topic"), Integer.parseInt(need("partition")));
                    consumer.assign(List.of(tp));
                    Map<TopicPartition, OffsetAndMetadata> m =
                        Map.of(tp, new OffsetAndMetadata(Long.parseLong(need("offset")), opts.getOrDefault("metadata", "")));
                    consumer.commitSync(m);
                    emit("event", "committed", "offsets", offsetsJson(m));
                    break;
                }
                case "fetch": {
                    Set<TopicPartition> tps = new HashSet<>(partitionsOf(need("topic")));
                    Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>(consumer.committed(tps));
                    for (TopicPartition tp : tps) m.putIfAbsent(tp, null);
                    emit("event", "offsets", "offsets", offsetsJson(m));
                    break;
                }
                default:
                    System.err.println("unknown mode " + mode);
                    exit(2);
            }
        } catch (WakeupException e) {
            // stopped by SIGTERM or stdin EOF
        } catch (KafkaException e) {
            error(e);
        }
        try {
            lastAssignment = names(consumer.assignment());
            consumer.close();
        } catch (KafkaException e) {
            error(e);
        }
        emit("event", "summary", "polls", polls, "errors", errors, "assignment", lastAssignment);
        exit(errors == 0 ? 0 : 1);
    }
}
