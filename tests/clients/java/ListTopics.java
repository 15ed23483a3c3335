// The Java AdminClient's view of groupd's topics, run as a single source file (no build step):
//   java -cp "$KAFKA_TEST_CLIENTS/java/lib/*" tests/clients/java/ListTopics.java BOOTSTRAP
// prints one JSON line: every topic with listInternal(true) and whether it is internal, the names
// without internal topics, and __consumer_offsets described.
import java.util.*;
import java.util.stream.*;
import org.apache.kafka.clients.admin.*;

public class ListTopics {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(props)) {
            String all = admin.listTopics(new ListTopicsOptions().listInternal(true)).listings().get().stream()
                .sorted(Comparator.comparing(TopicListing::name))
                .map(t -> "\"" + t.name() + "\": " + t.isInternal()).collect(Collectors.joining(", "));
            String plain = admin.listTopics().names().get().stream().sorted()
                .map(n -> "\"" + n + "\"").collect(Collectors.joining(", "));
            TopicDescription d = admin.describeTopics(List.of("__consumer_offsets")).allTopicNames().get()
                .get("__consumer_offsets");
            System.out.println("{\"internal\": {" + all + "}, \"names\": [" + plain + "], \"described\": {\"partitions\": "
                + d.partitions().size() + ", \"internal\": " + d.isInternal() + "}}");
        }
    }
}
