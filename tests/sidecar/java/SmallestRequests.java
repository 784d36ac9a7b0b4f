/*
 * The smallest Kafka requests on the wire, as Kafka's own encoder writes them (the
 * kafka-clients jar on the classpath): every Produce version the jar knows, carrying one
 * record with neither key nor value to a one-character topic, and ApiVersions v0, each
 * with a null client id. Prints one line per request: "<api> <version> <bytes>", the
 * bytes counting the 4-byte size before the header.
 *
 * Used by tests/sidecar/test_smallest_requests_on_the_wire.py to check the socket view's
 * MIN_WRITE_BYTES, MIN_WRITE_BYTES_V3 and MIN_REQUEST_BYTES
 * (hangwatch_sidecar.sockets.classify). Kafka 4 moved the record classes to
 * org.apache.kafka.common.record.internal: the test compiles this source as it is for
 * 3.x jars and with that package for 4.x jars.
 */
import java.util.Collections;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.message.ApiVersionsRequestData;
import org.apache.kafka.common.message.ProduceRequestData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.SimpleRecord;
import org.apache.kafka.common.requests.RequestHeader;

public final class SmallestRequests {
    private static int onTheWire(ApiKeys api, short version, Message body) {
        RequestHeader header = new RequestHeader(api, version, null, 0);
        return 4 + header.size() + body.size(new ObjectSerializationCache(), version);
    }

    public static void main(String[] args) {
        for (short v = ApiKeys.PRODUCE.oldestVersion(); v <= ApiKeys.PRODUCE.latestVersion(); v++) {
            byte magic = v < 2 ? RecordBatch.MAGIC_VALUE_V0
                : v == 2 ? RecordBatch.MAGIC_VALUE_V1 : RecordBatch.MAGIC_VALUE_V2;
            MemoryRecords records = MemoryRecords.withRecords(
                magic, Compression.NONE, new SimpleRecord(0L, (byte[]) null, (byte[]) null));
            ProduceRequestData.TopicProduceDataCollection topics =
                new ProduceRequestData.TopicProduceDataCollection();
            topics.add(new ProduceRequestData.TopicProduceData()
                .setName("t")
                .setPartitionData(Collections.singletonList(
                    new ProduceRequestData.PartitionProduceData().setIndex(0).setRecords(records))));
            ProduceRequestData produce = new ProduceRequestData()
                .setTransactionalId(null)
                .setAcks((short) 1)
                .setTimeoutMs(0)
                .setTopicData(topics);
            System.out.println("produce " + v + " " + onTheWire(ApiKeys.PRODUCE, v, produce));
        }
        System.out.println("api_versions 0 "
            + onTheWire(ApiKeys.API_VERSIONS, (short) 0, new ApiVersionsRequestData()));
    }
}
