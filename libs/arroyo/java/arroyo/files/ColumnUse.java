package arroyo.files;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.CaseWhen;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExprId;
import org.apache.spark.sql.catalyst.expressions.GetStructField;
import org.apache.spark.sql.catalyst.expressions.If;
import org.apache.spark.sql.catalyst.expressions.IsNotNull;
import org.apache.spark.sql.catalyst.expressions.IsNull;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.Expand;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.streaming.StreamingRelationV2;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.AtomicType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import scala.jdk.javaapi.CollectionConverters;

/**
 * Which columns of its Parquet sources a streaming query uses, so that the source decodes only
 * those. Spark pushes no column pruning into a streaming source (a micro-batch scan is built
 * without it), so the engine calls {@link #require} with each query's analysed plan and its
 * checkpoint directory before starting it; the query's {@code FilesStream}s, made by Spark at
 * start with a checkpoint directory under that one, look their columns up here. A query that
 * never registered reads every column.
 *
 * <p>Top-level columns are pruned only where the plan says for certain. From the query's
 * output (used whole) down: a projection or an aggregate needs what its needed outputs
 * reference (an aggregate, its grouping too); a node of a kind known to pass columns on by
 * reference (a filter, a join, a window, a watermark...) needs what is needed of it and what
 * its expressions reference; any other node (a union, a distinct, a Python map...) needs every
 * column of its inputs.
 *
 * <p>A struct column is read whole unless every use of it is a field taken from it
 * ({@code bid.auction}), a test of whether it is null, or a projection passing it on by
 * reference to such uses: then only the fields taken are decoded (at least one, which carries
 * the struct's nulls), and the others read as null. Nexmark's bid queries read two of the
 * {@code bid} struct's seven fields, and none of its strings.
 */
public final class ColumnUse {
  /** Nodes that pass their input's columns on by reference (never by position) and use of it
   * only what their expressions reference. (Projections and aggregates use only what the
   * outputs needed of them reference.) */
  private static final Set<String> BY_REFERENCE = Set.of("Filter", "Join",
      "Window", "Generate", "Expand", "EventTimeWatermark", "CollectMetrics", "SubqueryAlias",
      "View", "Sort", "GlobalLimit", "LocalLimit", "Deduplicate", "DeduplicateWithinWatermark",
      "Sample", "RepartitionByExpression", "Repartition", "ResolvedHint", "WithWindowDefinition");

  /** What a query uses of a source, by checkpoint directory and source ({@code use_id}). */
  private static final Map<String, Use> USED = new ConcurrentHashMap<>();

  /**
   * The columns a query uses of a source: {@code whole}, and struct columns of which it takes
   * only the {@code fields} given (by name; empty: only whether it is null).
   */
  record Use(Set<String> whole, Map<String, Set<String>> fields) {
    Use merge(Use other) {
      Set<String> all = new HashSet<>(whole);
      all.addAll(other.whole);
      Map<String, Set<String>> taken = new HashMap<>();
      for (Map<String, Set<String>> of : List.of(fields, other.fields)) {
        for (Map.Entry<String, Set<String>> column : of.entrySet()) {
          if (!all.contains(column.getKey())) {
            taken.computeIfAbsent(column.getKey(), c -> new HashSet<>()).addAll(column.getValue());
          }
        }
      }
      return new Use(all, taken);
    }

    /** What to read of a table of {@code columns}: the columns used, each struct of which only
     * fields are taken with those fields alone (in the table's order). */
    StructType of(StructType columns) {
      List<StructField> read = new ArrayList<>();
      for (StructField column : columns.fields()) {
        Set<String> taken = fields.get(column.name());
        if (whole.contains(column.name())) {
          read.add(column);
        } else if (taken != null) {
          if (!(column.dataType() instanceof StructType struct) || struct.length() == 0
              || legacyNullStructs()) {
            read.add(column);
            continue;
          }
          List<StructField> kept = new ArrayList<>();
          for (StructField field : struct.fields()) {
            if (taken.contains(field.name())) {
              kept.add(field);
            }
          }
          if (kept.isEmpty()) { // only its nulls: a struct of no fields cannot be read
            kept.add(cheapest(struct));
          }
          read.add(new StructField(column.name(), new StructType(kept.toArray(
              new StructField[0])), column.nullable(), column.metadata()));
        }
      }
      return new StructType(read.toArray(new StructField[0]));
    }

    /** A field of fixed width if the struct has one (a number, a time), else its first. */
    private static StructField cheapest(StructType struct) {
      for (StructField field : struct.fields()) {
        if (field.dataType() instanceof AtomicType && !(field.dataType() instanceof StringType)
            && !(field.dataType() instanceof BinaryType)) {
          return field;
        }
      }
      return struct.fields()[0];
    }

    /** Spark's legacy setting that reads a struct as null where the file has none of the
     * fields requested (since 4.1 a field the file has is read for its nulls): under it, a
     * pruned struct could read as null, so structs are read whole. */
    private static boolean legacyNullStructs() {
      return Boolean.parseBoolean(SQLConf.get().getConfString(
          "spark.sql.legacy.parquet.returnNullStructIfAllFieldsMissing", "false"));
    }
  }

  private ColumnUse() {}

  /** Records which columns of each Parquet file source {@code plan} (analysed) uses, for the
   * query whose checkpoint directory is {@code checkpoint}. */
  public static void require(LogicalPlan plan, String checkpoint) {
    Map<ExprId, String[]> sourced = new HashMap<>(); // attribute -> {id, column}
    collectSources(plan, sourced);
    if (sourced.isEmpty()) {
      return;
    }
    Set<ExprId> output = new HashSet<>();
    addAll(plan.output(), output);
    Set<ExprId> used = new HashSet<>();
    walk(plan, output, used);
    Takes takes = new Takes(sourced.keySet());
    takes.walk(plan);
    takes.wholly(plan.output()); // what the query gives is used whole
    Map<String, Use> uses = new HashMap<>();
    for (Map.Entry<ExprId, String[]> attribute : sourced.entrySet()) {
      String id = attribute.getValue()[0];
      String column = attribute.getValue()[1];
      Use use = uses.computeIfAbsent(id, i -> new Use(new HashSet<>(), new HashMap<>()));
      ExprId key = attribute.getKey();
      if (!used.contains(key)) {
        continue;
      }
      // A table read twice (a self-join) has a column under two ids: what either takes.
      if (takes.whole.contains(key) || !takes.taken.containsKey(key)) {
        use.whole().add(column);
      } else {
        use.fields().computeIfAbsent(column, c -> new HashSet<>()).addAll(takes.taken.get(key));
      }
    }
    for (Map.Entry<String, Use> source : uses.entrySet()) {
      Use use = source.getValue().merge(source.getValue()); // whole over taken
      USED.merge(key(checkpoint, source.getKey()), use, Use::merge);
    }
  }

  /** What a query uses of a source, or null where it never said (read it all).
   * {@code location} is the source's checkpoint directory ({@code <checkpoint>/sources/<n>}). */
  static Use used(String location, String id) {
    if (id == null || id.isEmpty()) {
      return null;
    }
    String checkpoint = queryCheckpoint(location);
    return checkpoint == null ? null : USED.get(key(checkpoint, id));
  }

  /** The checkpoint directory of the query whose source's is {@code location}
   * ({@code <checkpoint>/sources/<n>}), or null where it is not so. */
  static String queryCheckpoint(String location) {
    if (location == null) {
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
    return sources.getParent().toString();
  }

  private static String key(String checkpoint, String id) {
    return checkpointKey(checkpoint) + "\0" + id;
  }

  /** A query's checkpoint directory as the runner and Spark both name it (Spark's escaped,
   * with its scheme): its path alone. */
  static String checkpointKey(String checkpoint) {
    return new Path(checkpoint).toUri().getPath();
  }

  private static void collectSources(LogicalPlan node, Map<ExprId, String[]> sourced) {
    if (node instanceof StreamingRelationV2 relation
        && relation.table() instanceof BoundedFilesSource.FilesTable) {
      String id = relation.extraOptions().get("use_id");
      if (id != null && !id.isEmpty()) {
        for (Attribute attribute : CollectionConverters.asJava(relation.output())) {
          sourced.put(attribute.exprId(), new String[] {id, attribute.name()});
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

  /**
   * How a plan's nodes use the source columns: the fields they take of a struct column, and
   * the columns they use whole (a struct compared, grouped on, hashed, given to a function, or
   * passed to a node that uses its inputs by position). A projection's bare reference passes a
   * column on under its own id, and an alias of it, or of it masked by a condition (the
   * end-of-input mask: {@code CASE WHEN ... THEN s END AS s}), under a new one: neither is a use
   * of it, and what is taken of the new id is taken of the column.
   */
  private static final class Takes {
    final Map<ExprId, ExprId> origin = new HashMap<>(); // an id -> the source column it is
    final Set<ExprId> whole = new HashSet<>(); // of source columns
    final Map<ExprId, Set<String>> taken = new HashMap<>(); // source column -> fields

    Takes(Set<ExprId> sourced) {
      for (ExprId id : sourced) {
        origin.put(id, id);
      }
    }

    /** Children first, so that an alias is known before the nodes above use it. */
    void walk(LogicalPlan node) {
      for (LogicalPlan child : children(node)) {
        walk(child);
      }
      for (LogicalPlan subquery : CollectionConverters.asJava(node.subqueries())) {
        walk(subquery);
        wholly(subquery.output());
      }
      if (node instanceof Project project) {
        for (NamedExpression named : CollectionConverters.asJava(project.projectList())) {
          passOrTake((Expression) named);
        }
      } else if (node instanceof Aggregate aggregate) {
        for (Expression e : CollectionConverters.asJava(aggregate.groupingExpressions())) {
          take(e); // a struct grouped on is compared whole
        }
        for (NamedExpression e : CollectionConverters.asJava(aggregate.aggregateExpressions())) {
          if (!(e instanceof AttributeReference)) {
            take((Expression) e);
          }
        }
      } else if (node instanceof Expand expand) {
        expand(expand);
      } else if (BY_REFERENCE.contains(node.nodeName())) {
        for (Expression e : CollectionConverters.asJava(node.expressions())) {
          take(e);
        }
      } else {
        for (LogicalPlan child : children(node)) {
          wholly(child.output());
        }
      }
    }

    /** An expand's projections, by position in its output: a bare reference passes a column
     * on (under the output's id, which for grouping sets is a new one), a null passes nothing;
     * a position that passes two columns, or anything else, uses what it references. */
    private void expand(Expand expand) {
      List<Attribute> output = CollectionConverters.asJava(expand.output());
      for (scala.collection.Seq<Expression> row : CollectionConverters.asJava(
          expand.projections())) {
        List<Expression> values = CollectionConverters.asJava(row);
        for (int i = 0; i < values.size(); i++) {
          Expression e = values.get(i);
          ExprId out = output.get(i).exprId();
          if (e instanceof Literal literal && literal.value() == null) {
            continue;
          }
          if (e instanceof AttributeReference a) {
            if (a.exprId().equals(out)) {
              continue;
            }
            ExprId source = origin.get(a.exprId());
            ExprId before = origin.get(out);
            if (source != null && (before == null || before.equals(source))) {
              origin.put(out, source);
              continue;
            }
          }
          take(e);
        }
      }
    }

    void wholly(scala.collection.Seq<Attribute> attributes) {
      for (Attribute attribute : CollectionConverters.asJava(attributes)) {
        ExprId source = origin.get(attribute.exprId());
        if (source != null) {
          whole.add(source);
        }
      }
    }

    private void passOrTake(Expression e) {
      if (e instanceof AttributeReference) {
        return; // passed on as it is
      }
      if (e instanceof Alias alias) {
        ExprId source = passed(alias.child());
        if (source != null) {
          origin.put(alias.exprId(), source);
          takeConditions(alias.child());
          return;
        }
      }
      take(e);
    }

    /** The source column {@code e} is, unchanged or masked to null, or null. */
    private ExprId passed(Expression e) {
      if (e instanceof AttributeReference a) {
        return origin.get(a.exprId());
      }
      List<Expression> values = new ArrayList<>();
      if (e instanceof CaseWhen when) {
        for (scala.Tuple2<Expression, Expression> branch
            : CollectionConverters.asJava(when.branches())) {
          values.add(branch._2());
        }
        if (when.elseValue().isDefined()) {
          values.add(when.elseValue().get());
        }
      } else if (e instanceof If when) {
        values.add(when.trueValue());
        values.add(when.falseValue());
      } else {
        return null;
      }
      ExprId found = null;
      for (Expression value : values) {
        if (value instanceof Literal literal && literal.value() == null) {
          continue;
        }
        ExprId source = passed(value);
        if (source == null || (found != null && !found.equals(source))) {
          return null;
        }
        found = source;
      }
      return found;
    }

    private void takeConditions(Expression e) {
      if (e instanceof CaseWhen when) {
        for (scala.Tuple2<Expression, Expression> branch
            : CollectionConverters.asJava(when.branches())) {
          take(branch._1());
          takeConditions(branch._2());
        }
        if (when.elseValue().isDefined()) {
          takeConditions(when.elseValue().get());
        }
      } else if (e instanceof If when) {
        take(when.predicate());
        takeConditions(when.trueValue());
        takeConditions(when.falseValue());
      }
    }

    private void take(Expression e) {
      if (e instanceof GetStructField get && get.child() instanceof AttributeReference a
          && origin.containsKey(a.exprId())) {
        StructType struct = (StructType) a.dataType();
        taken.computeIfAbsent(origin.get(a.exprId()), k -> new HashSet<>())
            .add(struct.fields()[get.ordinal()].name());
        return;
      }
      if ((e instanceof IsNotNull || e instanceof IsNull)
          && e.children().head() instanceof AttributeReference a
          && origin.containsKey(a.exprId()) && a.dataType() instanceof StructType) {
        taken.computeIfAbsent(origin.get(a.exprId()), k -> new HashSet<>());
        return;
      }
      if (e instanceof AttributeReference a) {
        ExprId source = origin.get(a.exprId());
        if (source != null) {
          whole.add(source);
        }
        return;
      }
      for (Expression child : CollectionConverters.asJava(e.children())) {
        take(child);
      }
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
