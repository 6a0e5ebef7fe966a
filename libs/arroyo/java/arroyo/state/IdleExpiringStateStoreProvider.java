package arroyo.state;

import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.KeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateSchemaProvider;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreIterator;
import org.apache.spark.sql.execution.streaming.state.UnsafeRowPair;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampType;

import scala.Option;

/**
 * Spark's RocksDB state store, plus {@code updating_ttl} for updating aggregates: a key not
 * updated for the TTL is dropped, so its aggregate starts afresh when the key comes back and the
 * state of keys that never come back does not grow for the pipeline's life.
 *
 * <p>Spark's streaming aggregation has no state TTL of its own (only watermark eviction of
 * windowed keys), and expressing the TTL as a session window is refused in update mode. So the
 * planner gives each updating aggregate one more aggregate, {@code max(current_timestamp())}, the
 * last aggregate of the query: its buffer, the last field of each state value, is the time of
 * the last micro-batch that updated the key. The runner names the query's checkpoint and its TTL
 * in a session setting ({@link #TTL_PREFIX} + the checkpoint's state directory); for such a
 * store, each write store handed to the operator first drops the keys last updated more than the
 * TTL ago. Stores of every other operator and query behave exactly as Spark's, among them an
 * interval join's that the aggregate reads in the same query.
 *
 * <p>The time is processing time, Arroyo's own rule for updating state (time to idle). A scan
 * reads the whole store, so it runs at most once per tenth of the TTL: a key goes between TTL and
 * 1.1 x TTL after its last update. A key whose last update is that old and that has input in the
 * very batch of the scan keeps its state (Spark has read it before the store is written).
 */
public class IdleExpiringStateStoreProvider extends RocksDBStateStoreProvider {
  /** Session setting naming a query's state directory; its value is the TTL in milliseconds. */
  public static final String TTL_PREFIX = "spark.sql.streaming.stateStore.arroyo.updatingTtlMs.";

  private long ttlMs = -1;
  private int touchedField = -1;
  private long lastScanMs = Long.MIN_VALUE;

  @Override
  public void init(
      StateStoreId id,
      StructType keySchema,
      StructType valueSchema,
      KeyStateEncoderSpec keyStateEncoderSpec,
      boolean useColumnFamilies,
      StateStoreConf storeConf,
      Configuration hadoopConf,
      boolean useMultipleValuesPerKey,
      Option<StateSchemaProvider> stateSchemaProvider) {
    super.init(
        id,
        keySchema,
        valueSchema,
        keyStateEncoderSpec,
        useColumnFamilies,
        storeConf,
        hadoopConf,
        useMultipleValuesPerKey,
        stateSchemaProvider);
    String root = new Path(id.checkpointRootLocation()).toUri().getPath();
    Option<String> ttl = storeConf.sqlConfs().get(TTL_PREFIX + root);
    if (ttl.isEmpty() || useColumnFamilies || isGroupState(valueSchema)) {
      // A flatMapGroupsWithState in the same query (an interval join the aggregate reads)
      // expires its own state, by its timeouts.
      return;
    }
    int last = valueSchema.fields().length - 1;
    if (last < 0 || !(valueSchema.fields()[last].dataType() instanceof TimestampType)) {
      throw new IllegalStateException(
          "updating_ttl: the state of " + root + " (operator " + id.operatorId()
              + ") does not end in the time of its last update: " + valueSchema.simpleString());
    }
    ttlMs = Long.parseLong(ttl.get());
    touchedField = last;
  }

  /** Whether a store holds flatMapGroupsWithState's state: (groupState, timeoutTimestamp). */
  private static boolean isGroupState(StructType valueSchema) {
    String[] names = valueSchema.fieldNames();
    return names.length > 0 && names[names.length - 1].equals("timeoutTimestamp");
  }

  // Spark 4.1's signatures (later Spark adds forceSnapshotOnCommit and loadEmpty to both).
  @Override
  public StateStore getStore(long version, Option<String> uniqueId) {
    return expireIdle(super.getStore(version, uniqueId));
  }

  @Override
  public StateStore upgradeReadStoreToWriteStore(
      ReadStateStore readStore, long version, Option<String> uniqueId) {
    return expireIdle(super.upgradeReadStoreToWriteStore(readStore, version, uniqueId));
  }

  /** Drops the keys last updated more than the TTL ago; the drops commit with the batch. */
  private StateStore expireIdle(StateStore store) {
    if (ttlMs < 0) {
      return store;
    }
    long now = System.currentTimeMillis();
    if (lastScanMs != Long.MIN_VALUE && now - lastScanMs < ttlMs / 10) {
      return store;
    }
    lastScanMs = now;
    long oldestKeptMicros = (now - ttlMs) * 1000L;
    String family = StateStore.DEFAULT_COL_FAMILY_NAME();
    List<UnsafeRow> expired = new ArrayList<>();
    StateStoreIterator<UnsafeRowPair> pairs = store.iterator(family);
    try {
      while (pairs.hasNext()) {
        UnsafeRowPair pair = pairs.next();
        UnsafeRow value = pair.value();
        if (!value.isNullAt(touchedField) && value.getLong(touchedField) < oldestKeptMicros) {
          expired.add(pair.key().copy());
        }
      }
    } finally {
      pairs.close();
    }
    for (UnsafeRow key : expired) {
      store.remove(key, family);
    }
    return store;
  }
}
