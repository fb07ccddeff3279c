//! What a document costs to run and how deep it nests, worked out from the parsed document, its
//! variables and the schema's shape before the engine runs it (see `limits`).
//!
//! Every field costs 1 plus what it selects. A connection (a field with a `first` argument)
//! costs its list fields (`nodes`, `edges`) once per item it may return: `first` or `last`, or
//! the default page size. A `totalCount` that is counted when asked for (see [`COUNTED`])
//! costs as much as a page of the largest size, also under `first: 0`; the other counts are
//! kept with the data and cost 1. `_entities` costs its selection once per representation,
//! `discussionsByKeys` once per key (see [`PER_ITEM`]). An `offset` on a ranked order costs
//! each comment it skips (see [`RANKED`]). Depth counts nested fields as the engine
//! does (`__typename` neither costs nor nests).

use std::collections::HashMap;

use async_graphql::parser::types::{
    BaseType, DocumentOperations, ExecutableDocument, Field, FragmentDefinition, OperationType,
    Selection, SelectionSet, TypeKind, TypeSystemDefinition, VariableDefinition,
};
use async_graphql::{Name, Positioned, Value, Variables};

/// The connections whose `totalCount` is counted when asked for, as (type, field): a
/// sub-discussion's descendants (its subtree, in some layouts) and all discussions. The other
/// connections' totals are counters kept with the data (see `types::Total`).
pub const COUNTED: [(&str, &str); 4] = [
    ("Comment", "subDiscussion"),
    ("Query", "discussions"),
    ("Query", "moderationQueue"),
    ("Query", "commentsByAuthor"),
];

/// The root query fields that cost their selection once per item of a list argument, as
/// (field, argument).
pub const PER_ITEM: [(&str, &str); 2] = [
    ("_entities", "representations"),
    ("discussionsByKeys", "keys"),
];

/// The orders whose `offset` costs each comment it skips (see `Walk::ranked_offset`).
pub const RANKED: [&str; 3] = ["TOP", "BEST", "CONTROVERSIAL"];

/// What a field of an object type returns, as far as costs go.
#[derive(Debug)]
struct FieldShape {
    /// The named type it returns (lists and non-null stripped).
    ty: String,
    /// Whether it returns a list.
    list: bool,
    /// Whether it takes `first` (a connection).
    paged: bool,
}

/// The schema as costing sees it: the fields of each object type, and the root types.
#[derive(Debug, Default)]
pub struct Shape {
    fields: HashMap<String, HashMap<String, FieldShape>>,
    roots: [String; 3],
}

impl Shape {
    /// The shape of the schema printed as `sdl`; a text that does not parse gives a shape
    /// without types, where every field costs 1 and nothing pages (the schema's own SDL always
    /// parses; a test checks it).
    pub fn from_sdl(sdl: &str) -> Self {
        let mut shape = Shape {
            fields: HashMap::new(),
            roots: ["Query".into(), "Mutation".into(), "Subscription".into()],
        };
        let document = match async_graphql::parser::parse_schema(sdl) {
            Ok(document) => document,
            Err(error) => {
                tracing::error!(%error, "the schema's SDL does not parse: queries are costed without its types");
                return shape;
            }
        };
        for definition in document.definitions {
            match definition {
                TypeSystemDefinition::Schema(schema) => {
                    let schema = schema.node;
                    for (root, name) in shape.roots.iter_mut().zip([
                        schema.query,
                        schema.mutation,
                        schema.subscription,
                    ]) {
                        if let Some(name) = name {
                            *root = name.node.to_string();
                        }
                    }
                }
                TypeSystemDefinition::Type(ty) => {
                    let ty = ty.node;
                    let fields = match ty.kind {
                        TypeKind::Object(object) => object.fields,
                        TypeKind::Interface(interface) => interface.fields,
                        _ => continue,
                    };
                    let entry = shape.fields.entry(ty.name.node.to_string()).or_default();
                    for field in fields {
                        let field = field.node;
                        let mut base = &field.ty.node.base;
                        let list = matches!(base, BaseType::List(_));
                        while let BaseType::List(inner) = base {
                            base = &inner.base;
                        }
                        let BaseType::Named(named) = base else {
                            continue;
                        };
                        entry.insert(
                            field.name.node.to_string(),
                            FieldShape {
                                ty: named.to_string(),
                                list,
                                paged: field.arguments.iter().any(|a| a.node.name.node == "first"),
                            },
                        );
                    }
                }
                TypeSystemDefinition::Directive(_) => {}
            }
        }
        shape
    }

    fn field(&self, ty: &str, name: &str) -> Option<&FieldShape> {
        self.fields.get(ty)?.get(name)
    }

    fn root(&self, ty: OperationType) -> &str {
        match ty {
            OperationType::Query => &self.roots[0],
            OperationType::Mutation => &self.roots[1],
            OperationType::Subscription => &self.roots[2],
        }
    }
}

/// The prices costing uses, from config.
#[derive(Debug, Clone, Copy)]
pub struct Prices {
    /// Items a connection may return when `first` is not given.
    pub default_page_size: usize,
    /// What a `totalCount` counted when asked for costs.
    pub count: usize,
    /// Deepest nesting allowed: the walk stops past it.
    pub max_depth: usize,
    /// Highest cost allowed: the walk stops past it, and after visiting that many fields.
    pub max_cost: usize,
}

/// Which limit a document went over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// It nests deeper than allowed.
    Depth,
    /// It costs more than allowed (or has more fields, fragments expanded, than the cost allows).
    Cost,
}

/// The cost of every operation of `document` together, with `variables`: `Err` as soon as the
/// walk finds it nests or costs more than `prices` allow.
pub fn measure(
    shape: &Shape,
    prices: Prices,
    document: &ExecutableDocument,
    variables: &Variables,
) -> Result<usize, Over> {
    walk_document(shape, prices, document, variables, None)
}

/// What makes a document cost what it does, for the message that refuses it: its cost (or the
/// cost reached when the walk stopped) and its heaviest chain of nested connections, outermost
/// first, each with what one of it costs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explained {
    /// The document's cost, or what the walk had reached when it stopped at a limit.
    pub cost: usize,
    /// Whether the walk went through the whole document (`cost` is then exact).
    pub complete: bool,
    /// The heaviest chain of connections: each as written (`replies(first: 10)`) with the cost of
    /// one of it, selection included.
    pub drivers: Vec<(String, usize)>,
}

/// Walks `document` again, noting what each connection costs: the refusal path only.
pub fn explain(
    shape: &Shape,
    prices: Prices,
    document: &ExecutableDocument,
    variables: &Variables,
) -> Explained {
    let mut priced = Vec::new();
    let (cost, complete) =
        match walk_document(shape, prices, document, variables, Some(&mut priced)) {
            Ok(cost) => (cost, true),
            // The walk stopped at the fields-visited limit (as many as the cost limit, each
            // costing at least one), so the document costs more than the limit, whatever was
            // priced before the stop.
            Err(_) => (
                priced
                    .iter()
                    .filter(|p| p.chain.len() == 1)
                    .map(|p| p.cost)
                    .sum::<usize>()
                    .max(prices.max_cost.saturating_add(1)),
                false,
            ),
        };
    let mut drivers = Vec::new();
    let mut prefix: Vec<String> = Vec::new();
    loop {
        let heaviest = priced
            .iter()
            .filter(|p| p.chain.len() == prefix.len() + 1 && p.chain.starts_with(&prefix))
            .max_by_key(|p| p.cost);
        let Some(next) = heaviest else { break };
        drivers.push((next.chain[prefix.len()].clone(), next.cost));
        prefix = next.chain.clone();
    }
    Explained {
        cost,
        complete,
        drivers,
    }
}

/// A connection the walk priced, with the connections it is nested in.
#[derive(Debug)]
struct Priced {
    chain: Vec<String>,
    cost: usize,
}

fn walk_document(
    shape: &Shape,
    prices: Prices,
    document: &ExecutableDocument,
    variables: &Variables,
    record: Option<&mut Vec<Priced>>,
) -> Result<usize, Over> {
    let mut walk = Walk {
        shape,
        prices,
        fragments: &document.fragments,
        variables,
        definitions: &[],
        visits: 0,
        path: Vec::new(),
        over: None,
        chain: Vec::new(),
        record,
    };
    let operations: Vec<_> = match &document.operations {
        DocumentOperations::Single(op) => vec![&op.node],
        DocumentOperations::Multiple(ops) => ops.values().map(|op| &op.node).collect(),
    };
    let mut cost = 0usize;
    for operation in operations {
        walk.definitions = &operation.variable_definitions;
        let root = shape.root(operation.ty);
        cost = cost.saturating_add(walk.set(
            &operation.selection_set.node,
            Some(root),
            1,
            Scope::Plain,
        ));
        // Explaining goes on past the cost (not past the fields visited: a fragment bomb
        // still stops), to find what drives it.
        if cost > prices.max_cost && walk.record.is_none() {
            walk.over.get_or_insert(Over::Cost);
        }
        if let Some(over) = walk.over {
            return Err(over);
        }
    }
    Ok(cost)
}

/// What the selection being walked belongs to.
#[derive(Debug, Clone, Copy)]
enum Scope {
    /// Anything but a connection.
    Plain,
    /// A connection that may return `items` items, whose `totalCount` is `counted` on demand.
    Page { items: usize, counted: bool },
}

/// Walks the selections of a document, fragments expanded.
struct Walk<'a, 'b> {
    shape: &'a Shape,
    prices: Prices,
    fragments: &'a HashMap<Name, Positioned<FragmentDefinition>>,
    variables: &'a Variables,
    /// The variables of the operation being walked, for their defaults.
    definitions: &'a [Positioned<VariableDefinition>],
    /// Fields visited so far, fragments expanded (also where a zero page size multiplies).
    visits: usize,
    /// The fragments being expanded, so a cycle (which validation refuses) ends the walk.
    path: Vec<&'a Name>,
    over: Option<Over>,
    /// The connections being walked, as written, when `record` is on.
    chain: Vec<String>,
    /// Where each connection's cost is noted (only to explain a refusal).
    record: Option<&'b mut Vec<Priced>>,
}

impl<'a> Walk<'a, '_> {
    /// The cost of `set`, selected on `ty` (when known), whose fields are at `depth`.
    fn set(
        &mut self,
        set: &'a SelectionSet,
        ty: Option<&'a str>,
        depth: usize,
        scope: Scope,
    ) -> usize {
        let mut cost = 0usize;
        for item in &set.items {
            if self.over.is_some() {
                break;
            }
            let more = match &item.node {
                Selection::Field(field) => self.field(&field.node, ty, depth, scope),
                Selection::InlineFragment(fragment) => {
                    let fragment = &fragment.node;
                    let on = fragment
                        .type_condition
                        .as_ref()
                        .map(|c| c.node.on.node.as_str());
                    self.set(&fragment.selection_set.node, on.or(ty), depth, scope)
                }
                Selection::FragmentSpread(spread) => {
                    let name = &spread.node.fragment_name.node;
                    match self.fragments.get(name) {
                        Some(fragment) if !self.path.contains(&name) => {
                            let on = fragment.node.type_condition.node.on.node.as_str();
                            self.path.push(name);
                            let cost =
                                self.set(&fragment.node.selection_set.node, Some(on), depth, scope);
                            self.path.pop();
                            cost
                        }
                        _ => 0,
                    }
                }
            };
            cost = cost.saturating_add(more);
        }
        cost
    }

    /// The cost of one field of `ty` at `depth`, with what it selects.
    fn field(
        &mut self,
        field: &'a Field,
        ty: Option<&'a str>,
        depth: usize,
        scope: Scope,
    ) -> usize {
        self.visits += 1;
        if self.visits > self.prices.max_cost {
            self.over = Some(Over::Cost);
            return 0;
        }
        let name = field.name.node.as_str();
        if name == "__typename" {
            return 0;
        }
        if depth > self.prices.max_depth {
            self.over = Some(Over::Depth);
            return 0;
        }
        let shape = ty.and_then(|ty| self.shape.field(ty, name));
        let below = shape.map(|s| s.ty.as_str());
        let selection = &field.selection_set.node;
        let deeper = depth + 1;
        match scope {
            Scope::Page { counted: true, .. } if name == "totalCount" => {
                return self.prices.count.max(1);
            }
            Scope::Page { items, .. } if shape.is_some_and(|s| s.list) => {
                let each = self.set(selection, below, deeper, Scope::Plain);
                return items.saturating_mul(each).saturating_add(1);
            }
            _ => {}
        }
        let per_item = PER_ITEM
            .iter()
            .find(|(per, _)| *per == name)
            .filter(|_| ty == Some(self.shape.root(OperationType::Query)));
        let inner = if let Some((_, items)) = per_item {
            let each = self.set(selection, below, deeper, Scope::Plain);
            self.list_length(field, items).saturating_mul(each)
        } else if shape.is_some_and(|s| s.paged) {
            let items = self.items(field);
            let skipped = self.ranked_offset(field);
            let page = Scope::Page {
                items,
                counted: ty.is_some_and(|ty| COUNTED.contains(&(ty, name))),
            };
            if self.record.is_none() {
                self.set(selection, below, deeper, page)
                    .saturating_add(skipped)
            } else {
                self.chain.push(self.label(field, items));
                let cost = self
                    .set(selection, below, deeper, page)
                    .saturating_add(skipped);
                let chain = self.chain.clone();
                self.chain.pop();
                if let Some(record) = self.record.as_deref_mut() {
                    record.push(Priced {
                        chain,
                        cost: cost.saturating_add(1),
                    });
                }
                cost
            }
        } else {
            self.set(selection, below, deeper, Scope::Plain)
        };
        inner.saturating_add(1)
    }

    /// A connection as written: `alias: name(first: n)`, or `name(first: n by default)`.
    fn label(&self, field: &Field, items: usize) -> String {
        let alias = field
            .alias
            .as_ref()
            .map(|a| format!("{}: ", a.node))
            .unwrap_or_default();
        let given = matches!(self.argument(field, "first"), Some(Value::Number(_)));
        let default = if given { "" } else { " by default" };
        format!("{alias}{}(first: {items}{default})", field.name.node)
    }

    /// A variable's value: as sent, else its default.
    fn variable(&self, name: &Name) -> Option<&'a Value> {
        self.variables.get(name).or_else(|| {
            self.definitions
                .iter()
                .find(|d| d.node.name.node == *name)
                .and_then(|d| d.node.default_value())
        })
    }

    /// The value of an argument, its variables replaced by their values.
    fn argument(&self, field: &Field, name: &str) -> Option<Value> {
        let value = field.get_argument(name)?.node.clone();
        let resolved = value.into_const_with(|name| {
            Ok::<_, std::convert::Infallible>(self.variable(&name).cloned().unwrap_or(Value::Null))
        });
        match resolved {
            Ok(value) => Some(value),
            Err(never) => match never {},
        }
    }

    /// The items a connection field may return: `first` or `last` (the larger, when a document
    /// gives both, which the field refuses), or the default page size. A value the field
    /// refuses (negative, not a number) returns nothing.
    fn items(&self, field: &Field) -> usize {
        let size = |name: &str| match self.argument(field, name) {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => Some(
                n.as_i64()
                    .and_then(|n| usize::try_from(n).ok())
                    .unwrap_or(0),
            ),
            Some(_) => Some(0),
        };
        match (size("first"), size("last")) {
            (None, None) => self.prices.default_page_size,
            (first, last) => first.unwrap_or(0).max(last.unwrap_or(0)),
        }
    }

    /// The comments a ranked list's `offset` reads and skips: its `offset` when the field's
    /// `order` is one of [`RANKED`] (no index holds a place in a ranked order, so each skipped
    /// comment is read), else 0 (every other order's offset is an index range).
    fn ranked_offset(&self, field: &Field) -> usize {
        let ranked = matches!(
            self.argument(field, "order"),
            Some(Value::Enum(order)) if RANKED.contains(&order.as_str())
        );
        match self.argument(field, "offset") {
            Some(Value::Number(n)) if ranked => n
                .as_i64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(0),
            _ => 0,
        }
    }

    /// How many items the list argument `name` of a field holds (a single value is a list of
    /// one).
    fn list_length(&self, field: &Field, name: &str) -> usize {
        match self.argument(field, name) {
            None | Some(Value::Null) => 0,
            Some(Value::List(items)) => items.len(),
            Some(_) => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRICES: Prices = Prices {
        default_page_size: 20,
        count: 100,
        max_depth: 48,
        max_cost: 50_000,
    };

    fn shape() -> Shape {
        Shape::from_sdl(&crate::graphql::schema_builder().finish().sdl())
    }

    fn cost(query: &str, variables: serde_json::Value) -> Result<usize, Over> {
        cost_with(PRICES, query, variables)
    }

    fn cost_with(prices: Prices, query: &str, variables: serde_json::Value) -> Result<usize, Over> {
        let document = async_graphql::parser::parse_query(query).unwrap();
        measure(
            &shape(),
            prices,
            &document,
            &Variables::from_json(variables),
        )
    }

    #[test]
    fn the_schema_has_the_shape_costing_relies_on() {
        let shape = shape();
        for (ty, field) in COUNTED {
            let found = shape.field(ty, field).unwrap();
            assert!(found.paged, "{ty}.{field}");
            assert!(
                shape.field(&found.ty, "totalCount").is_some(),
                "{ty}.{field}"
            );
        }
        for (ty, field) in [
            ("Discussion", "comments"),
            ("Discussion", "threads"),
            ("Comment", "replies"),
        ] {
            let found = shape.field(ty, field).unwrap();
            assert!(found.paged && !found.list, "{ty}.{field}");
        }
        let nodes = shape.field("CommentConnection", "nodes").unwrap();
        assert!(nodes.list && nodes.ty == "Comment");
        assert_eq!(shape.field("Query", "_entities").unwrap().ty, "_Entity");
        assert!(shape.field("Subscription", "commentPosted").is_some());
    }

    #[test]
    fn fields_cost_one_and_connections_per_item() {
        assert_eq!(cost("{ __typename }", serde_json::json!({})), Ok(0));
        assert_eq!(
            cost(
                r#"{ discussion(id: "x") { id title } }"#,
                serde_json::json!({})
            ),
            Ok(3)
        );
        // threads 1 + nodes (1 + 10 × slug) + pageInfo (1 + 1) + a kept totalCount 1.
        let threads = r#"{ discussion(id: "x") { threads(first: 10) { nodes { slug } pageInfo { hasNextPage } totalCount } } }"#;
        assert_eq!(
            cost(threads, serde_json::json!({})),
            Ok(1 + 1 + 1 + 10 + 2 + 1)
        );
        // The default page size, and a variable with its default.
        let replies = r#"query($f: Int = 5) { comment(discussionId: "x", slug: "y") { a: replies { nodes { slug } } b: replies(first: $f) { nodes { slug } } } }"#;
        assert_eq!(
            cost(replies, serde_json::json!({})),
            Ok(1 + (1 + 1 + 20) + (1 + 1 + 5))
        );
        assert_eq!(
            cost(replies, serde_json::json!({ "f": 7 })),
            Ok(1 + (1 + 1 + 20) + (1 + 1 + 7))
        );
        // `last` costs what `first` does, from a variable too; both given cost the larger.
        let last = r#"query($l: Int) { discussion(id: "x") { a: threads(last: 10) { nodes { slug } } b: comments(last: $l, order: NEWEST) { nodes { slug } } } }"#;
        assert_eq!(
            cost(last, serde_json::json!({ "l": 30 })),
            Ok(1 + (1 + 1 + 10) + (1 + 1 + 30))
        );
        let both = r#"{ discussion(id: "x") { threads(first: 3, last: 40) { nodes { slug } } } }"#;
        assert_eq!(cost(both, serde_json::json!({})), Ok(1 + 1 + 1 + 40));
    }

    #[test]
    fn counts_cost_what_they_read() {
        // A kept count costs 1; a sub-discussion's is counted, also under `first: 0`.
        let kept = r#"{ discussion(id: "x") { commentCount comments(first: 0) { totalCount } } }"#;
        assert_eq!(cost(kept, serde_json::json!({})), Ok(1 + 1 + 1 + 1));
        let counted = r#"{ comment(discussionId: "x", slug: "y") { subDiscussion(first: 0) { totalCount } } }"#;
        assert_eq!(cost(counted, serde_json::json!({})), Ok(1 + 1 + 100));
        let through_fragment = r#"{ comment(discussionId: "x", slug: "y") { subDiscussion(first: 0) { ...T } } } fragment T on CommentConnection { totalCount }"#;
        assert_eq!(
            cost(through_fragment, serde_json::json!({})),
            Ok(1 + 1 + 100)
        );
        assert_eq!(
            cost(
                "{ discussions(first: 0) { totalCount } }",
                serde_json::json!({})
            ),
            Ok(1 + 100)
        );
        // The shape of the finding: each alias reads a hundred sub-discussion counts.
        let alias = |i: usize| {
            format!("c{i}: comments(first: 100, offset: {}) {{ nodes {{ subDiscussion(first: 0) {{ totalCount }} }} }}", i * 100)
        };
        let one = format!(r#"{{ discussion(id: "x") {{ {} }} }}"#, alias(0));
        assert_eq!(cost(&one, serde_json::json!({})), Ok(1 + 1 + 1 + 100 * 101));
        let thirty = format!(
            r#"{{ discussion(id: "x") {{ {} }} }}"#,
            (0..30).map(alias).collect::<Vec<_>>().join(" ")
        );
        assert_eq!(cost(&thirty, serde_json::json!({})), Err(Over::Cost));
    }

    #[test]
    fn a_ranked_offset_costs_each_comment_it_skips() {
        let ranked = r#"query($o: Int) { discussion(id: "x") { comments(order: TOP, first: 1, offset: $o) { nodes { slug } } } }"#;
        let page = 1 + 1 + 1 + 1;
        assert_eq!(
            cost(ranked, serde_json::json!({ "o": 990 })),
            Ok(page + 990)
        );
        assert_eq!(cost(ranked, serde_json::json!({})), Ok(page));
        // Other orders' offsets are index ranges.
        let chronological =
            r#"{ discussion(id: "x") { comments(first: 1, offset: 19990) { nodes { slug } } } }"#;
        assert_eq!(cost(chronological, serde_json::json!({})), Ok(page));
        // The finding's shape: thirty aliases at the cap cost thirty thousand comments.
        let thirty = format!(
            r#"{{ discussion(id: "x") {{ {} }} }}"#,
            (0..30)
                .map(|i| format!("t{i}: threads(order: CONTROVERSIAL, first: 1, offset: 1000) {{ nodes {{ slug }} }}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        assert_eq!(
            cost(&thirty, serde_json::json!({})),
            Ok(1 + 30 * (1 + 1 + 1 + 1000))
        );
    }

    #[test]
    fn entities_cost_their_selection_per_representation() {
        let query = r#"query($r: [_Any!]!) { _entities(representations: $r) { ... on Comment { subDiscussion(first: 10) { nodes { slug } } } } }"#;
        let reps = |n: usize| serde_json::json!({ "r": vec![serde_json::json!({ "__typename": "Comment", "discussionId": "x", "slug": "y" }); n] });
        assert_eq!(cost(query, reps(1)), Ok(1 + 12));
        assert_eq!(cost(query, reps(3)), Ok(1 + 3 * 12));
        assert_eq!(cost(query, reps(5_000)), Err(Over::Cost));
        let inline = r#"{ _entities(representations: [{__typename: "Discussion", id: "a"}, {__typename: "Discussion", id: "b"}]) { ... on Discussion { title } } }"#;
        // Two representations of a title each.
        assert_eq!(cost(inline, serde_json::json!({})), Ok(1 + 2));
    }

    #[test]
    fn discussions_by_keys_cost_their_selection_per_key() {
        let query = r#"query($k: [String!]!) { discussionsByKeys(keys: $k) { key commentCount threads(first: 10) { nodes { slug } } } }"#;
        let keys = |n: usize| serde_json::json!({ "k": vec!["a"; n] });
        // Per key: key 1 + commentCount 1 + threads (1 + nodes (1 + 10 × slug)).
        let each = 1 + 1 + (1 + 1 + 10);
        assert_eq!(cost(query, keys(0)), Ok(1));
        assert_eq!(cost(query, keys(1)), Ok(1 + each));
        assert_eq!(cost(query, keys(100)), Ok(1 + 100 * each));
        // A single string is a list of one.
        assert_eq!(
            cost(
                r#"{ discussionsByKeys(keys: "a") { key } }"#,
                serde_json::json!({})
            ),
            Ok(1 + 1)
        );
        let heavy = r#"query($k: [String!]!) { discussionsByKeys(keys: $k) { threads(first: 100) { nodes { replies(first: 100) { nodes { slug } } } } } }"#;
        assert_eq!(cost(heavy, keys(100)), Err(Over::Cost));
    }

    #[test]
    fn depth_is_the_engines_and_fragment_bombs_stop() {
        let nested = |n: usize| {
            format!(
                r#"{{ comment(discussionId: "x", slug: "y") {{ {} slug {} }} }}"#,
                "parent { ".repeat(n),
                "} ".repeat(n)
            )
        };
        // comment + n parents + slug.
        assert!(cost(&nested(46), serde_json::json!({})).is_ok());
        assert_eq!(cost(&nested(47), serde_json::json!({})), Err(Over::Depth));
        let mut bomb = String::from("{ discussions(first: 0) { ...F0 } }");
        for i in 0..20 {
            bomb.push_str(&format!(
                " fragment F{i} on DiscussionConnection {{ ...F{} ...F{} }}",
                i + 1,
                i + 1
            ));
        }
        bomb.push_str(" fragment F20 on DiscussionConnection { nodes { id } }");
        let small = Prices {
            max_cost: 1_000,
            ..PRICES
        };
        assert_eq!(
            cost_with(small, &bomb, serde_json::json!({})),
            Err(Over::Cost)
        );
    }

    /// The tree a comment widget asks for: 20 threads, two levels of 10 replies and one of 5.
    const WIDGET_TREE: &str = "query Tree($d: ID!) { discussion(id: $d) { threads(first: 20) { nodes { ...C replies(first: 10) { nodes { ...C replies(first: 10) { nodes { ...C replies(first: 5) { nodes { ...C } } } } } } } } } } fragment C on Comment { slug text author { name } posted replyCount }";

    #[test]
    fn a_refusal_names_the_connections_that_drive_the_cost() {
        let small = Prices {
            max_cost: 1_000,
            ..PRICES
        };
        let document = async_graphql::parser::parse_query(WIDGET_TREE).unwrap();
        let variables = Variables::from_json(serde_json::json!({ "d": "x" }));
        assert_eq!(
            measure(&shape(), small, &document, &variables),
            Err(Over::Cost)
        );
        let explained = explain(&shape(), small, &document, &variables);
        let big = Prices {
            max_cost: 1_000_000,
            ..PRICES
        };
        let full = measure(&shape(), big, &document, &variables).unwrap();
        assert!(explained.complete);
        assert_eq!(explained.cost, full);
        let labels: Vec<&str> = explained.drivers.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(
            labels,
            [
                "threads(first: 20)",
                "replies(first: 10)",
                "replies(first: 10)",
                "replies(first: 5)"
            ]
        );
        // Each level costs its items times one comment below it.
        let costs: Vec<usize> = explained.drivers.iter().map(|(_, c)| *c).collect();
        assert!(costs.windows(2).all(|w| w[0] > w[1] * 5), "{costs:?}");
        assert_eq!(costs[0] + 1, full, "the discussion field and its threads");
        // Aliases and defaults are named as written.
        let aliased = r#"{ discussion(id: "x") { a: comments { nodes { slug } } b: comments(first: 90) { nodes { slug text posted } } } }"#;
        let document = async_graphql::parser::parse_query(aliased).unwrap();
        let explained = explain(&shape(), small, &document, &Variables::default());
        assert_eq!(explained.drivers[0].0, "b: comments(first: 90)");
        let tiny = Prices {
            max_cost: 10,
            ..PRICES
        };
        let explained = explain(&shape(), tiny, &document, &Variables::default());
        assert_eq!(explained.drivers.len(), 1);
        // A walk stopped by the fields-visited limit before any connection was priced still
        // reports a cost above the limit, never 0.
        let one = Prices {
            max_cost: 1,
            ..PRICES
        };
        let explained = explain(&shape(), one, &document, &Variables::default());
        assert!(!explained.complete);
        assert!(explained.cost > 1, "{explained:?}");
    }

    #[test]
    fn the_default_limit_runs_a_widget_tree_and_refuses_four_wide_levels() {
        let config = crate::config::Config::defaults().unwrap();
        let prices = Prices {
            max_cost: config.max_complexity,
            ..PRICES
        };
        let tree = cost_with(prices, WIDGET_TREE, serde_json::json!({ "d": "x" }));
        assert!(tree.is_ok(), "{tree:?}");
        let wide = r#"{ discussion(id: "x") { threads(first: 100) { nodes { slug replies(first: 100) { nodes { slug replies(first: 100) { nodes { slug replies(first: 100) { nodes { slug } } } } } } } } } }"#;
        assert_eq!(
            cost_with(prices, wide, serde_json::json!({})),
            Err(Over::Cost)
        );
    }
}
