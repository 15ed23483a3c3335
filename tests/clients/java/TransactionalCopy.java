// A consume-transform-produce loop with exactly-once (KIP-447); run as a single source file:
//   java -cp "$KAFKA_TEST_CLIENTS/java/lib/*" tests/clients/java/TransactionalCopy.java BOOTSTRAP IN OUT GROUP TXN_ID COUNT [abort]
// reads IN (read_committed, group GROUP, earliest), and for each poll writes the values upper-cased to OUT
// partition 0 and sends the consumed positions with sendOffsetsToTransaction(offsets, groupMetadata())
// in one transaction of producer TXN_ID, until COUNT records are copied; then a second producer with
// the same TXN_ID fences the first, whose next commit (or, under transactions v2, where its send is refused
// first, its abort) must fail with ProducerFencedException.
// With "abort", each poll's records are first written and their offsets sent in a transaction that is
// aborted, then the same records again in one that commits.
// Prints one JSON line {"copied": N, "fenced": true|false, "ended": transactions committed or aborted};
// gives up after 90 s. Exit 0 iff all copied.
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.*;

public class TransactionalCopy {
    static Producer<String, String> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", txnId);
        Producer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
        producer.initTransactions();
        return producer;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], in = args[1], out = args[2], group = args[3], txnId = args[4];
        int count = Integer.parseInt(args[5]);
        boolean abortFirst = args.length > 6 && args[6].equals("abort");
        int ended = 0;
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("enable.auto.commit", "false");
        c.put("auto.offset.reset", "earliest");
        c.put("isolation.level", "read_committed");
        int copied = 0;
        boolean fenced = false;
        long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
        Producer<String, String> producer = producer(bootstrap, txnId);
        try (Consumer<String, String> consumer = new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(in));
            while (copied < count && System.nanoTime() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                if (records.isEmpty()) continue;
                if (abortFirst) {
                    producer.beginTransaction();
                    Map<TopicPartition, OffsetAndMetadata> past = new HashMap<>();
                    for (ConsumerRecord<String, String> r : records) {
                        producer.send(new ProducerRecord<>(out, 0, null, "ABORTED-" + r.value()));
                        past.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    producer.sendOffsetsToTransaction(past, consumer.groupMetadata());
                    producer.abortTransaction();
                    ended++;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>(out, 0, null, r.value().toUpperCase()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                ended++;
                copied += records.count();
            }
            try (Producer<String, String> successor = producer(bootstrap, txnId)) {
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(out, 0, null, "ZOMBIE"));
                producer.commitTransaction();
            } catch (ProducerFencedException e) {
                fenced = true;
            } catch (org.apache.kafka.common.KafkaException e) {
                System.err.println("zombie's commit: " + e + " caused by " + e.getCause());
                fenced = e.getCause() instanceof ProducerFencedException;
                if (e instanceof InvalidProducerEpochException || e.getCause() instanceof InvalidProducerEpochException) {
                    // transactions v2: the send itself was refused (the broker hands the coordinator's
                    // PRODUCER_FENCED on as INVALID_PRODUCER_EPOCH, abortable); the abort is fenced
                    try {
                        producer.abortTransaction();
                    } catch (ProducerFencedException f) {
                        fenced = true;
                    } catch (org.apache.kafka.common.KafkaException f) {
                        System.err.println("zombie's abort: " + f + " caused by " + f.getCause());
                        fenced = f.getCause() instanceof ProducerFencedException;
                    }
                }
            }
        } finally {
            producer.close(Duration.ofSeconds(5));
        }
        System.out.println("{\"copied\": " + copied + ", \"fenced\": " + fenced + ", \"ended\": " + ended + "}");
        System.exit(copied == count ? 0 : 1);
    }
}
