package arroyo.files;

import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExprId;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.streaming.StreamingRelationV2;

import scala.jdk.javaapi.CollectionConverters;

/**
 * Which columns of its Parquet sources a streaming query uses, so that the source decodes only
 * those. Spark pushes no column pruning into a streaming source (a micro-batch scan is built
 * without it), so the engine calls {@link #require} with each query's analysed plan and its
 * checkpoint directory before starting it; the query's {@code FilesStream}s, made by Spark at
 * start with a checkpoint directory under that one, look their columns up here. A query that
 * never registered reads every column.
 *
 * <p>Only whole top-level columns are pruned, and only where the plan says for certain. From the
 * query's output (used whole) down: a projection or an aggregate needs what its needed outputs
 * reference (an aggregate, its grouping too); a node of a kind known to pass columns on by
 * reference (a filter, a join, a window, a watermark...) needs what is needed of it and what
 * its expressions reference; any other node (a union, a distinct, a Python map...) needs every
 * column of its inputs.
 */
public final class ColumnUse {
  /** Nodes that pass their input's columns on by reference (never by position) and use of it
   * only what their expressions reference. (Projections and aggregates use only what the
   * outputs needed of them reference.) */
  private static final Set<String> BY_REFERENCE = Set.of("Filter", "Join",
      "Window", "Generate", "Expand", "EventTimeWatermark", "CollectMetrics", "SubqueryAlias",
      "View", "Sort", "GlobalLimit", "LocalLimit", "Deduplicate", "DeduplicateWithinWatermark",
      "Sample", "RepartitionByExpression", "Repartition", "ResolvedHint", "WithWindowDefinition");

  /** Columns used, by checkpoint directory and source ({@code use_id} option). */
  private static final Map<String, Set<String>> USED = new ConcurrentHashMap<>();

  private ColumnUse() {}

  /** Records which columns of each Parquet file source {@code plan} (analysed) uses, for the
   * query whose checkpoint directory is {@code checkpoint}. */
  public static void require(LogicalPlan plan, String checkpoint) {
    Map<ExprId, String> sourced = new java.util.HashMap<>(); // attribute -> "id\0column"
    collectSources(plan, sourced);
    if (sourced.isEmpty()) {
      return;
    }
    Set<ExprId> output = new HashSet<>();
    addAll(plan.output(), output);
    Set<ExprId> used = new HashSet<>();
    walk(plan, output, used);
    Map<String, Set<String>> columns = new java.util.HashMap<>();
    for (Map.Entry<ExprId, String> attribute : sourced.entrySet()) {
      String[] parts = attribute.getValue().split("\0", 2);
      Set<String> of = columns.computeIfAbsent(parts[0], id -> new HashSet<>());
      if (used.contains(attribute.getKey())) {
        of.add(parts[1]);
      }
    }
    for (Map.Entry<String, Set<String>> source : columns.entrySet()) {
      USED.merge(key(checkpoint, source.getKey()), source.getValue(), (a, b) -> {
        Set<String> both = new HashSet<>(a);
        both.addAll(b);
        return both;
      });
    }
  }

  /** The columns a query uses of a source, or null where it never said (read them all).
   * {@code location} is the source's checkpoint directory ({@code <checkpoint>/sources/<n>}). */
  static Set<String> used(String location, String id) {
    if (id == null || id.isEmpty()) {
      return null;
    }
    Path sources;
    try {
      sources = new Path(new java.net.URI(location)).getParent(); // Spark gives it escaped
    } catch (java.net.URISyntaxException err) {
      sources = new Path(location).getParent();
    }
    if (sources == null || sources.getParent() == null) {
      return null;
    }
    return USED.get(key(sources.getParent().toString(), id));
  }

  private static String key(String checkpoint, String id) {
    return new Path(checkpoint).toUri().getPath() + "\0" + id;
  }

  private static void collectSources(LogicalPlan node, Map<ExprId, String> sourced) {
    if (node instanceof StreamingRelationV2 relation
        && relation.table() instanceof BoundedFilesSource.FilesTable) {
      String id = relation.extraOptions().get("use_id");
      if (id != null && !id.isEmpty()) {
        for (Attribute attribute : CollectionConverters.asJava(relation.output())) {
          sourced.put(attribute.exprId(), id + "\0" + attribute.name());
        }
      }
    }
    for (LogicalPlan child : children(node)) {
      collectSources(child, sourced);
    }
    for (LogicalPlan subquery : CollectionConverters.asJava(node.subqueries())) {
      collectSources(subquery, sourced);
    }
  }

  /**
   * Marks what {@code node} needs of its inputs to give {@code required} of its output, down to
   * the leaves (a source's needed columns are {@code used} when the walk reaches it).
   */
  private static void walk(LogicalPlan node, Set<ExprId> required, Set<ExprId> used) {
    used.addAll(required);
    Set<ExprId> needed = new HashSet<>(required);
    String name = node.nodeName();
    if (node instanceof Project project) {
      needed.clear();
      for (NamedExpression e : CollectionConverters.asJava(project.projectList())) {
        if (required.contains(e.exprId())) {
          addReferences((Expression) e, needed);
        }
      }
    } else if (node instanceof Aggregate aggregate) {
      needed.clear();
      for (Expression e : CollectionConverters.asJava(aggregate.groupingExpressions())) {
        addReferences(e, needed);
      }
      for (NamedExpression e : CollectionConverters.asJava(aggregate.aggregateExpressions())) {
        if (required.contains(e.exprId())) {
          addReferences((Expression) e, needed);
        }
      }
    } else if (BY_REFERENCE.contains(name)) {
      for (Expression e : CollectionConverters.asJava(node.expressions())) {
        addReferences(e, needed);
      }
    } else {
      for (LogicalPlan child : children(node)) {
        addAll(child.output(), needed);
      }
    }
    for (LogicalPlan child : children(node)) {
      walk(child, needed, used);
    }
    for (LogicalPlan subquery : CollectionConverters.asJava(node.subqueries())) {
      Set<ExprId> all = new HashSet<>();
      addAll(subquery.output(), all);
      walk(subquery, all, used);
    }
  }

  private static void addReferences(Expression expression, Set<ExprId> into) {
    for (Attribute attribute : CollectionConverters.asJava(expression.references().toSeq())) {
      into.add(attribute.exprId());
    }
  }

  private static List<LogicalPlan> children(LogicalPlan node) {
    return CollectionConverters.asJava(node.children());
  }

  private static void addAll(scala.collection.Seq<Attribute> attributes, Set<ExprId> used) {
    for (Attribute attribute : CollectionConverters.asJava(attributes)) {
      used.add(attribute.exprId());
    }
  }
}
