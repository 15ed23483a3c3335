// Topic configs through the Java AdminClient, run as a single source file (no build step):
//   java -cp "$KAFKA_TEST_CLIENTS/java/lib/*" tests/clients/java/TopicConfigs.java BOOTSTRAP TOPIC
// creates TOPIC with cleanup.policy=compact, appends delete to it and sets retention.ms, then tries a
// bad value; prints one JSON line: {"created": {name: [value, source]}, "altered": {...}, "bad": the
// exception's class}.
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.stream.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.config.ConfigResource;

public class TopicConfigs {
    static String described(Admin admin, ConfigResource resource) throws Exception {
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        return config.entries().stream()
            .filter(e -> e.name().equals("cleanup.policy") || e.name().equals("retention.ms"))
            .sorted(Comparator.comparing(ConfigEntry::name))
            .map(e -> "\"" + e.name() + "\": [\"" + e.value() + "\", \"" + e.source() + "\"]")
            .collect(Collectors.joining(", ", "{", "}"));
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        String topic = args[1];
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        try (Admin admin = Admin.create(props)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1).configs(Map.of("cleanup.policy", "compact"))))
                .all().get();
            String created = described(admin, resource);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.APPEND),
                new AlterConfigOp(new ConfigEntry("retention.ms", "60000"), AlterConfigOp.OpType.SET)))).all().get();
            String altered = described(admin, resource);
            String bad = "none";
            try {
                admin.incrementalAlterConfigs(Map.of(resource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all().get();
            } catch (ExecutionException e) {
                bad = e.getCause().getClass().getSimpleName();
            }
            System.out.println("{\"created\": " + created + ", \"altered\": " + altered
                + ", \"bad\": \"" + bad + "\"}");
        }
    }
}
