// A KafkaShareConsumer (KIP-932) with explicit acknowledgement; run as a single source file:
//   java -cp "$KAFKA_TEST_CLIENTS/java/lib/*" tests/clients/java/ShareConsume.java BOOTSTRAP TOPIC GROUP COUNT
// reads TOPIC as a member of share group GROUP (share.acknowledgement.mode=explicit), whose values are
// "v<i>" for offsets 0..COUNT-1, and acknowledges record i by i mod 3: 0 ACCEPT; 1 RELEASE on its first
// delivery, ACCEPT on the next; 2 REJECT. commitSync after each poll. Prints one JSON line
// {"deliveries": {"<offset>": [delivery counts seen]}, "accepted": N, "rejected": N} once every record
// is accepted or rejected; gives up after 90 s. Exit 0 iff all were.
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareConsume {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int count = Integer.parseInt(args[3]);
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("share.acknowledgement.mode", "explicit");
        Map<Long, List<Integer>> deliveries = new TreeMap<>();
        Set<Long> done = new HashSet<>();
        int accepted = 0, rejected = 0;
        long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
        try (ShareConsumer<String, String> consumer =
                 new KafkaShareConsumer<>(c, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            while (done.size() < count && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    int i = Integer.parseInt(r.value().substring(1));
                    int delivery = r.deliveryCount().map(Short::intValue).orElse(-1);
                    deliveries.computeIfAbsent(r.offset(), k -> new ArrayList<>()).add(delivery);
                    AcknowledgeType type;
                    if (i % 3 == 2) {
                        type = AcknowledgeType.REJECT;
                    } else if (i % 3 == 1 && delivery == 1) {
                        type = AcknowledgeType.RELEASE;
                    } else {
                        type = AcknowledgeType.ACCEPT;
                    }
                    consumer.acknowledge(r, type);
                    if (type != AcknowledgeType.RELEASE) {
                        done.add(r.offset());
                        if (type == AcknowledgeType.ACCEPT) accepted++; else rejected++;
                    }
                }
                consumer.commitSync(Duration.ofSeconds(30)).forEach((tp, error) -> error.ifPresent(e -> {
                    throw new RuntimeException("acknowledgement of " + tp + " failed", e);
                }));
            }
        }
        StringBuilder out = new StringBuilder("{\"deliveries\": {");
        String sep = "";
        for (Map.Entry<Long, List<Integer>> e : deliveries.entrySet()) {
            out.append(sep).append('"').append(e.getKey()).append("\": ").append(e.getValue());
            sep = ", ";
        }
        out.append("}, \"accepted\": ").append(accepted).append(", \"rejected\": ").append(rejected).append('}');
        System.out.println(out);
        System.exit(done.size() == count ? 0 : 1);
    }
}
