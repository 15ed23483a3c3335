// Many Kafka Streams instances in one JVM, for bench/streams_bench.py: how long a group of N instances takes
// to have every task running, and to take a dead instance's tasks over.
//
// Each instance is a KafkaStreams client with one stream thread and its own state directory, running the same
// stateless topology (--input -> mapValues -> --output): one task per input partition. Instances of one JVM
// share the application id with every other JVM started with it, so a run can put the instance that is to
// die (kill -9) in a JVM of its own.
// Arguments: --bootstrap H:P --application-id ID --instances N --name PREFIX --state-dir DIR
//   --group-protocol classic|streams --input T --output T [--config k=v,k=v]
// stdout, one line per event:
//   STARTING                                 the instances are built; the first start() comes next
//   STARTED                                  every instance's start() returned
//   TASKS <name-i> <state> <tasks or ->      an instance's state or active tasks changed (sorted "0_0,0_3")
//   ERROR <name-i> <exception>               an uncaught exception (the instance shuts down)
// SIGTERM closes every instance.
import java.util.*;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.*;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.*;

public class StreamsScale {
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
        for (String required : List.of("bootstrap", "application-id", "instances", "name", "state-dir", "input",
                "output")) {
            if (!opts.containsKey(required)) throw new IllegalArgumentException("--" + required + " is required");
        }
        return opts;
    }

    static Topology topology(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .mapValues(v -> v == null ? null : v.toUpperCase(Locale.ROOT))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    static String activeTasks(KafkaStreams streams) {
        List<String> tasks = new ArrayList<>();
        for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
            for (TaskMetadata task : thread.activeTasks()) tasks.add(task.taskId().toString());
        }
        Collections.sort(tasks);
        return tasks.isEmpty() ? "-" : String.join(",", tasks);
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = parse(args);
        int n = Integer.parseInt(opts.get("instances"));
        Map<String, KafkaStreams> instances = new LinkedHashMap<>();
        Map<String, String> last = new ConcurrentHashMap<>();
        for (int i = 0; i < n; i++) {
            String name = opts.get("name") + "-" + i;
            Properties props = new Properties();
            props.put(StreamsConfig.APPLICATION_ID_CONFIG, opts.get("application-id"));
            props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("bootstrap"));
            props.put(StreamsConfig.STATE_DIR_CONFIG, opts.get("state-dir") + "/" + name);
            props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
            props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, opts.getOrDefault("group-protocol", "classic"));
            props.put(StreamsConfig.CLIENT_ID_CONFIG, name);
            for (String kv : opts.getOrDefault("config", "").split(",")) {
                if (kv.isEmpty()) continue;
                String[] p = kv.split("=", 2);
                props.put(p[0], p[1]);
            }
            KafkaStreams streams = new KafkaStreams(topology(opts.get("input"), opts.get("output")), props);
            streams.setUncaughtExceptionHandler(e -> {
                emit("ERROR " + name + " " + e);
                return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            instances.put(name, streams);
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> instances.values().parallelStream()
                .forEach(s -> s.close(java.time.Duration.ofSeconds(20)))));
        emit("STARTING");
        for (KafkaStreams streams : instances.values()) streams.start();
        emit("STARTED");
        // Poll rather than listen: a task change within RUNNING has no state transition to hook.
        while (true) {
            for (Map.Entry<String, KafkaStreams> e : instances.entrySet()) {
                String now = e.getValue().state() + " " + activeTasks(e.getValue());
                if (!now.equals(last.put(e.getKey(), now))) emit("TASKS " + e.getKey() + " " + now);
            }
            Thread.sleep(20);
        }
    }
}
