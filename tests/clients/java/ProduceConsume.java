// Produce, then consume in a group with a synchronous commit after each record; run as a single source
// file (no build step):
//   java -cp "$KAFKA_TEST_CLIENTS/java/lib/*" tests/clients/java/ProduceConsume.java BOOTSTRAP TOPIC GROUP V1,V2,...
// sends the values to partition 0 (acks=all, each send awaited), then reads as many records as it sent
// in GROUP (earliest when the group has no offset; 6 s session), committing offset+1 after each one.
// Prints one JSON line {"records": [[offset, "value"], ...]}; gives up after 90 s. Exit 0 iff every
// value was sent and as many records were read.
import java.time.Duration;
import java.util.*;
import java.util.stream.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class ProduceConsume {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        List<String> values = List.of(args[3].split(","));

        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        try (Producer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (String v : values) producer.send(new ProducerRecord<>(topic, 0, null, v)).get();
        }

        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("enable.auto.commit", "false");
        c.put("auto.offset.reset", "earliest");
        c.put("session.timeout.ms", "6000");
        c.put("heartbeat.interval.ms", "1000");
        List<String> read = new ArrayList<>();
        long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
        try (Consumer<String, String> consumer = new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            while (read.size() < values.size() && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    read.add("[" + r.offset() + ", \"" + r.value() + "\"]");
                    consumer.commitSync(Map.of(new TopicPartition(r.topic(), r.partition()),
                                               new OffsetAndMetadata(r.offset() + 1)));
                }
            }
        }
        System.out.println(read.stream().collect(Collectors.joining(", ", "{\"records\": [", "]}")));
        System.exit(read.size() == values.size() ? 0 : 1);
    }
}
