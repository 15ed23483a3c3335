// Two Kafka Streams apps run against groupd (tests/support/streams.py compiles this file against the jars of
// .ci/install-streams and starts it; tests/clients/test_streams_apps.py):
//   wordcount  lines on --input -> words -> groupBy (repartition topic <id>-words-repartition) -> count into
//              the store "counts" (changelog <id>-counts-changelog, compacted) -> "word" = "count" on --output
//   join       a KStream (--left: key = customer, value = order) joined with a KTable (--right: key =
//              customer, value = name; store "customers", changelog <id>-customers-changelog) -> "order@name"
// Arguments: --bootstrap H:P --application-id ID --app wordcount|join --guarantee at_least_once|exactly_once_v2
//   --group-protocol classic|streams --state-dir DIR --application-server 127.0.0.1:PORT [--standbys N]
//   [--input T] [--output T] [--left T] [--right T] [--threads N] [--commit-ms N] [--session-ms N]
//   [--config k=v,k=v] (any StreamsConfig, also prefixed ones such as producer.transaction.timeout.ms)
// Output values are strings (a count in decimal) so any client reads them back.
//
// stdout, one line per event (stderr has the library's log):
//   STATE <new state>                       KafkaStreams.State changes (CREATED -> REBALANCING -> RUNNING ...)
//   ASSIGNED <active tasks> STANDBY <tasks>  this instance's tasks (sorted "0_0,1_2" or "-"), when they change
//   METADATA <host:port>=<topic-partition,...> STANDBY=<...> STORES=<...>   one line per client (all clients,
//                                           from metadataForAllStreamsClients()), then METADATA-END, when it changes
//   ERROR <exception>                       an uncaught exception (the client then shuts down, exit 1)
// stdin, one command a line: `KEY <store> <key>` -> `KEY <store> <key> <host:port> <partition>` (where a key
// lives: queryMetadataForKey), `GET <store> <key>` -> `VALUE <store> <key> <value or null>` (the local store).
// SIGTERM closes the app (exit 0); a fatal error exits 1.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.CountDownLatch;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.*;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.*;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

public class StreamsApps {
    static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static Map<String, String> parse(String[] args) {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) throw new IllegalArgumentException("not an option: " + args[i]);
            opts.put(args[i].substring(2), args[i + 1]);
        }
        for (String required : List.of("bootstrap", "application-id", "app", "state-dir")) {
            if (!opts.containsKey(required)) throw new IllegalArgumentException("--" + required + " is required");
        }
        return opts;
    }

    static Topology wordCount(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> lines = builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()));
        lines.flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
            .toStream()
            .mapValues(count -> Long.toString(count))
            .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    static Topology join(String left, String right, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> customers = builder.table(right, Consumed.with(Serdes.String(), Serdes.String()),
            Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("customers")
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()));
        builder.stream(left, Consumed.with(Serdes.String(), Serdes.String()))
            .join(customers, (order, name) -> order + "@" + name)
            .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    static String tasks(Set<TaskMetadata> tasks) {
        String s = tasks.stream().map(t -> t.taskId().toString()).sorted().collect(Collectors.joining(","));
        return s.isEmpty() ? "-" : s;
    }

    static String partitions(Set<TopicPartition> parts) {
        String s = parts.stream().map(TopicPartition::toString).sorted().collect(Collectors.joining(","));
        return s.isEmpty() ? "-" : s;
    }

    static String metadata(KafkaStreams streams) {
        List<String> lines = new ArrayList<>();
        for (StreamsMetadata m : streams.metadataForAllStreamsClients()) {
            String stores = m.stateStoreNames().stream().sorted().collect(Collectors.joining(","));
            lines.add("METADATA " + m.host() + ":" + m.port() + "=" + partitions(m.topicPartitions())
                + " STANDBY=" + partitions(m.standbyTopicPartitions()) + " STORES=" + (stores.isEmpty() ? "-" : stores));
        }
        Collections.sort(lines);
        return String.join("\n", lines);
    }

    /** Prints this instance's tasks and the cluster's metadata whenever they change (polled: neither has a
     *  listener of its own, and both settle after the state listener's RUNNING). */
    static void watch(KafkaStreams streams) {
        String lastTasks = null, lastMetadata = null;
        while (true) {
            try {
                Thread.sleep(200);
                KafkaStreams.State state = streams.state();
                if (!state.isRunningOrRebalancing()) {
                    if (state == KafkaStreams.State.NOT_RUNNING || state == KafkaStreams.State.ERROR) return;
                    continue;
                }
                Set<TaskMetadata> active = new HashSet<>(), standby = new HashSet<>();
                for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                    active.addAll(t.activeTasks());
                    standby.addAll(t.standbyTasks());
                }
                String taskLine = "ASSIGNED " + tasks(active) + " STANDBY " + tasks(standby);
                if (state == KafkaStreams.State.RUNNING && !taskLine.equals(lastTasks)) {
                    emit(taskLine);
                    lastTasks = taskLine;
                }
                String meta = metadata(streams);
                if (state == KafkaStreams.State.RUNNING && !meta.isEmpty() && !meta.equals(lastMetadata)) {
                    emit(meta + "\nMETADATA-END");
                    lastMetadata = meta;
                }
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException e) {
                // metadata is unavailable while a rebalance is under way: read it again on the next turn
            }
        }
    }

    static void commands(KafkaStreams streams) {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] words = line.trim().split(" ", 3);
                try {
                    if (words.length == 3 && words[0].equals("KEY")) {
                        KeyQueryMetadata m = streams.queryMetadataForKey(words[1], words[2], Serdes.String().serializer());
                        emit("KEY " + words[1] + " " + words[2] + " " + m.activeHost().host() + ":"
                            + m.activeHost().port() + " " + m.partition());
                    } else if (words.length == 3 && words[0].equals("GET")) {
                        ReadOnlyKeyValueStore<String, Object> store = streams.store(
                            StoreQueryParameters.fromNameAndType(words[1], QueryableStoreTypes.<String, Object>keyValueStore()));
                        emit("VALUE " + words[1] + " " + words[2] + " " + store.get(words[2]));
                    } else if (!line.isBlank()) {
                        emit("UNKNOWN " + line);
                    }
                } catch (RuntimeException e) {
                    emit("FAILED " + line + " " + e);
                }
            }
        } catch (java.io.IOException e) {
            // stdin closed: no more commands
        }
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opts;
        try {
            opts = parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("usage: " + e.getMessage());
            System.exit(2);
            return;
        }
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, opts.get("application-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("bootstrap"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, opts.getOrDefault("guarantee", "at_least_once"));
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, opts.getOrDefault("group-protocol", "classic"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, opts.get("state-dir"));
        props.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, opts.getOrDefault("standbys", "0"));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, opts.getOrDefault("threads", "1"));
        if (opts.containsKey("application-server")) {
            props.put(StreamsConfig.APPLICATION_SERVER_CONFIG, opts.get("application-server"));
        }
        // every update reaches the changelog and the output at once (no record cache), committed often
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, opts.getOrDefault("commit-ms", "200"));
        // a member killed with -9 leaves the classic group after this session timeout (Streams: 45 s)
        String session = opts.getOrDefault("session-ms", "6000");
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), session);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG),
            Integer.toString(Math.max(100, Integer.parseInt(session) / 6)));
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        for (String kv : opts.getOrDefault("config", "").split(",")) {
            if (kv.isBlank()) continue;
            String[] pair = kv.split("=", 2);
            props.put(pair[0].trim(), pair.length > 1 ? pair[1].trim() : "");
        }

        String app = opts.get("app");
        Topology topology;
        if (app.equals("wordcount")) {
            topology = wordCount(opts.getOrDefault("input", "wc-input"), opts.getOrDefault("output", "wc-output"));
        } else if (app.equals("join")) {
            topology = join(opts.getOrDefault("left", "orders"), opts.getOrDefault("right", "customers"),
                opts.getOrDefault("output", "join-output"));
        } else {
            System.err.println("usage: --app wordcount|join");
            System.exit(2);
            return;
        }
        System.err.println(topology.describe());

        KafkaStreams streams = new KafkaStreams(topology, props);
        CountDownLatch done = new CountDownLatch(1);
        int[] exitCode = {0};
        streams.setStateListener((now, before) -> {
            emit("STATE " + now);
            if (now == KafkaStreams.State.ERROR) exitCode[0] = 1;
            if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) done.countDown();
        });
        streams.setUncaughtExceptionHandler(e -> {
            emit("ERROR " + e.toString().replace('\n', ' '));
            exitCode[0] = 1;
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
            emit("CLOSED");
        }));
        Thread watcher = new Thread(() -> watch(streams), "watcher");
        watcher.setDaemon(true);
        Thread commander = new Thread(() -> commands(streams), "commands");
        commander.setDaemon(true);
        streams.start();
        watcher.start();
        commander.start();
        done.await();
        // ERROR: close the client's resources (the shutdown hook's close is then quick) and exit non-zero
        if (exitCode[0] != 0) {
            streams.close(Duration.ofSeconds(10));
            System.exit(exitCode[0]);
        }
    }
}
