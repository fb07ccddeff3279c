//! Limits on the shape of a GraphQL document, checked before the engine runs it: lexical tokens
//! (before parsing), aliased fields and root fields (after parsing, with fragments expanded), and
//! its depth and cost (`cost`), alone and summed over the operations of a batch. The errors of
//! each stage get the codes clients and gateways know (Apollo's names). None of this is an engine
//! extension: with any extension installed, the engine sends every field it resolves through the
//! extension chain.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, FragmentDefinition, OperationDefinition, OperationType,
    Selection, SelectionSet,
};
use async_graphql::{Name, Pos, Positioned, Request, Response, ServerError, Variables};

use super::cost::{self, Over, Prices, Shape};

/// The document limits, from config.
#[derive(Debug, Clone, Copy)]
pub struct DocumentLimits {
    /// Most lexical tokens.
    pub max_tokens: usize,
    /// Most aliased fields, fragments expanded (in a batch, of all its documents together).
    pub max_aliases: usize,
    /// Most fields at the root of an operation, fragments expanded (in a batch, of all its
    /// operations together).
    pub max_root_fields: usize,
    /// Whether `__schema` and `__type` may be asked for.
    pub introspection: bool,
    /// Deepest field nesting.
    pub max_depth: usize,
    /// Highest cost (in a batch, of all its operations together).
    pub max_cost: usize,
    /// Items a connection may return when `first` is not given.
    pub default_page_size: usize,
    /// What a `totalCount` counted when asked for costs: the largest page.
    pub count_cost: usize,
}

/// Positions of the arguments whose value is a variable, in every selection of a document.
fn variable_arguments(document: &ExecutableDocument) -> HashSet<Pos> {
    fn walk(set: &SelectionSet, out: &mut HashSet<Pos>) {
        for item in &set.items {
            match &item.node {
                Selection::Field(field) => {
                    for (name, value) in &field.node.arguments {
                        if value.node.clone().into_const().is_none() {
                            out.insert(name.pos);
                        }
                    }
                    walk(&field.node.selection_set.node, out);
                }
                Selection::InlineFragment(f) => walk(&f.node.selection_set.node, out),
                Selection::FragmentSpread(_) => {}
            }
        }
    }
    let mut out = HashSet::new();
    match &document.operations {
        DocumentOperations::Single(op) => walk(&op.node.selection_set.node, &mut out),
        DocumentOperations::Multiple(ops) => {
            for op in ops.values() {
                walk(&op.node.selection_set.node, &mut out);
            }
        }
    }
    for fragment in document.fragments.values() {
        walk(&fragment.node.selection_set.node, &mut out);
    }
    out
}

impl DocumentLimits {
    /// Refuses a document with more lexical tokens than allowed. Counted on the text as sent,
    /// before a persisted query is looked up or anything is parsed.
    pub fn check_tokens(&self, query: &str) -> Result<(), ServerError> {
        if count_tokens(query, self.max_tokens) > self.max_tokens {
            return Err(too_big(format!(
                "the document has more than {} tokens",
                self.max_tokens
            )));
        }
        Ok(())
    }

    /// Parses the request's document (unless it was given parsed), leaving it in the request so
    /// the engine does not parse it again, and checks it: no mutation in a request that must
    /// not write, introspection only where allowed, at most so many root and aliased fields
    /// (fragments expanded), and its depth and cost under the limits.
    pub fn check(
        &self,
        request: &mut Request,
        read_only: bool,
        shape: &Shape,
    ) -> Result<Checked, ServerError> {
        let variables = std::mem::take(&mut request.variables);
        let checked = self.check_with(request, &variables, read_only, shape);
        request.variables = variables;
        checked
    }

    fn check_with(
        &self,
        request: &mut Request,
        variables: &Variables,
        read_only: bool,
        shape: &Shape,
    ) -> Result<Checked, ServerError> {
        let document = request
            .parsed_query()
            .map_err(|e| with_code(e, "GRAPHQL_PARSE_FAILED"))?;
        if read_only && has_mutation(document) {
            return Err(with_code(
                ServerError::new("mutations must be sent with POST", None),
                "BAD_USER_INPUT",
            ));
        }
        let operations: Vec<&SelectionSet> = match &document.operations {
            DocumentOperations::Single(op) => vec![&op.node.selection_set.node],
            DocumentOperations::Multiple(ops) => {
                ops.values().map(|op| &op.node.selection_set.node).collect()
            }
        };
        let mut aliases = Walk::new(&document.fragments, self.max_aliases);
        let mut root_fields = 0usize;
        for set in &operations {
            let mut roots = Walk::new(&document.fragments, self.max_root_fields);
            roots.count(set, false, &mut Vec::new());
            if !self.introspection && roots.introspects {
                return Err(with_code(
                    ServerError::new("introspection is turned off on this server", None),
                    "GRAPHQL_VALIDATION_FAILED",
                ));
            }
            if roots.over() {
                return Err(too_big(format!(
                    "an operation selects more than {} root fields",
                    self.max_root_fields
                )));
            }
            root_fields = root_fields.saturating_add(roots.seen);
            aliases.count(set, true, &mut Vec::new());
            if aliases.over() {
                return Err(too_big(format!(
                    "the document has more than {} aliased fields",
                    self.max_aliases
                )));
            }
        }
        let prices = Prices {
            default_page_size: self.default_page_size,
            count: self.count_cost,
            max_depth: self.max_depth,
            max_cost: self.max_cost,
        };
        let cost =
            cost::measure(shape, prices, document, variables).map_err(|over| match over {
                Over::Depth => too_big(format!(
                    "the document nests fields more than {} deep",
                    self.max_depth
                )),
                Over::Cost => {
                    let explained = cost::explain(shape, prices, document, variables);
                    self.costs_too_much(&explained)
                }
            })?;
        Ok(Checked {
            variable_arguments: variable_arguments(document),
            usage: Usage {
                cost,
                aliases: aliases.seen,
                root_fields,
            },
        })
    }

    /// Checks the operations of a batch together: their costs, aliased fields and root fields,
    /// summed, must each stay under the limit one document has.
    pub fn check_batch<'a>(
        &self,
        usages: impl IntoIterator<Item = &'a Usage>,
    ) -> Result<(), ServerError> {
        let total = usages
            .into_iter()
            .fold(Usage::default(), |sum, usage| Usage {
                cost: sum.cost.saturating_add(usage.cost),
                aliases: sum.aliases.saturating_add(usage.aliases),
                root_fields: sum.root_fields.saturating_add(usage.root_fields),
            });
        if total.cost > self.max_cost {
            return Err(self.too_costly("the batch"));
        }
        if total.aliases > self.max_aliases {
            return Err(too_big(format!(
                "the batch has more than {} aliased fields in all",
                self.max_aliases
            )));
        }
        if total.root_fields > self.max_root_fields {
            return Err(too_big(format!(
                "the batch selects more than {} root fields in all",
                self.max_root_fields
            )));
        }
        Ok(())
    }

    /// The refusal of a document that costs too much: its cost, the limit, the chain of
    /// connections that drives the cost, and how costs are counted. The cost and limit are also
    /// in the extensions (`cost`, `maxCost`).
    fn costs_too_much(&self, explained: &cost::Explained) -> ServerError {
        let at_least = if explained.complete { "" } else { "at least " };
        let mut message = format!(
            "the document costs {at_least}{}, more than the limit of {}",
            explained.cost, self.max_cost
        );
        if !explained.drivers.is_empty() {
            let chain: Vec<String> = explained
                .drivers
                .iter()
                .enumerate()
                .map(|(i, (label, cost))| {
                    let each = if i == 0 { "" } else { " each" };
                    format!("`{label}` ({cost}{each})")
                })
                .collect();
            let _ = write!(
                message,
                "; most of it comes from {}: ask for fewer items (`first`) or fewer levels",
                chain.join(" › ")
            );
        }
        let _ = write!(message, ". How costs count: {}", self.pricing());
        let mut error = too_big(message);
        let extensions = error.extensions.get_or_insert_with(Default::default);
        extensions.set("cost", explained.cost);
        extensions.set("maxCost", self.max_cost);
        error
    }

    fn too_costly(&self, what: &str) -> ServerError {
        too_big(format!(
            "{what} costs more than {}: {}",
            self.max_cost,
            self.pricing()
        ))
    }

    /// How costs are counted, for the messages of refusals.
    fn pricing(&self) -> String {
        format!(
            "each field costs 1, a connection's selection once per item it may return (`first`, else {}), a counted `totalCount` {}, `_entities` its selection once per representation and `discussionsByKeys` once per key",
            self.default_page_size, self.count_cost
        )
    }
}

/// What a document takes of the limits that a batch shares.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    /// Its cost.
    pub cost: usize,
    /// Its aliased fields, fragments expanded.
    pub aliases: usize,
    /// The root fields of its operations, fragments expanded.
    pub root_fields: usize,
}

/// What the checks learned about a document that the codes of the engine's own errors need:
/// where it passes a variable as an argument, so that a value that does not fit is told apart as
/// a variable's.
pub struct Checked {
    variable_arguments: HashSet<Pos>,
    /// What the document takes of the limits a batch shares.
    pub usage: Usage,
}

impl Checked {
    /// Gives the errors the engine raised before running the document (they have no path)
    /// the codes clients and gateways know: a document too deep to walk could not be parsed; a
    /// variable whose value does not fit its type is bad input; anything else the engine's
    /// validation refused is a bad document. Errors about choosing the operation or the
    /// transport are left to [`super::error::ensure_codes`] (bad input).
    pub fn code_engine_errors(&self, response: &mut Response) {
        let uncoded = |e: &ServerError| {
            e.path.is_empty()
                && e.extensions
                    .as_ref()
                    .is_none_or(|ext| ext.get("code").is_none())
        };
        let mut validation = Vec::new();
        for (i, error) in response.errors.iter_mut().enumerate() {
            if !uncoded(error) || REQUEST_ERRORS.iter().any(|m| error.message.starts_with(m)) {
                continue;
            }
            if error.message.starts_with(TOO_DEEP_TO_PARSE) {
                set_code(error, "GRAPHQL_PARSE_FAILED");
                continue;
            }
            validation.push(i);
        }
        let variables = validation.iter().any(|&i| {
            let e = &response.errors[i];
            e.message.to_ascii_lowercase().contains("variable")
                || (e.message.starts_with("Invalid value for argument")
                    && e.locations
                        .iter()
                        .any(|at| self.variable_arguments.contains(at)))
        });
        let code = match variables {
            true => "BAD_USER_INPUT",
            false => "GRAPHQL_VALIDATION_FAILED",
        };
        for i in validation {
            set_code(&mut response.errors[i], code);
        }
    }
}

/// How the engine's error for a document nested past its parser's limit begins.
const TOO_DEEP_TO_PARSE: &str = "The recursion depth of the query cannot be greater than";
/// How the engine's errors about the request rather than its document begin.
const REQUEST_ERRORS: [&str; 3] = [
    "Unknown operation named",
    "Operation name required in request",
    "Subscriptions are not supported on this transport",
];

/// Marks a request that must not write (an HTTP GET): a document with a mutation is refused,
/// also when it arrives by persisted-query hash.
pub struct ReadOnly;

fn has_mutation(document: &ExecutableDocument) -> bool {
    let is_mutation = |op: &Positioned<async_graphql::parser::types::OperationDefinition>| {
        op.node.ty == OperationType::Mutation
    };
    match &document.operations {
        DocumentOperations::Single(op) => is_mutation(op),
        DocumentOperations::Multiple(ops) => ops.values().any(is_mutation),
    }
}

/// The error with `code` in its extensions, unless it has a code already.
pub(super) fn with_code(mut error: ServerError, code: &str) -> ServerError {
    set_code(&mut error, code);
    error
}

/// Gives the error `code` in its extensions, unless it has a code already.
fn set_code(error: &mut ServerError, code: &str) {
    let extensions = error.extensions.get_or_insert_with(Default::default);
    if extensions.get("code").is_none() {
        extensions.set("code", code);
    }
}

fn too_big(message: impl std::fmt::Display) -> ServerError {
    with_code(
        ServerError::new(format!("query refused: {message}"), None),
        "GRAPHQL_VALIDATION_FAILED",
    )
}

/// Counts fields through selection sets and fragment spreads, stopping once over the limit.
struct Walk<'a> {
    fragments: &'a HashMap<Name, Positioned<FragmentDefinition>>,
    limit: usize,
    seen: usize,
    /// Whether a counted field is `__schema` or `__type`.
    introspects: bool,
}

impl<'a> Walk<'a> {
    fn new(fragments: &'a HashMap<Name, Positioned<FragmentDefinition>>, limit: usize) -> Self {
        Self {
            fragments,
            limit,
            seen: 0,
            introspects: false,
        }
    }

    fn over(&self) -> bool {
        self.seen > self.limit
    }

    /// Counts the fields of `set` (only aliased ones, and at every depth, when `aliased_deep`;
    /// otherwise every field of this level). `path` holds the fragments being expanded, so a
    /// cycle (which validation refuses later) ends the walk.
    fn count(&mut self, set: &'a SelectionSet, aliased_deep: bool, path: &mut Vec<&'a Name>) {
        for item in &set.items {
            if self.over() {
                return;
            }
            match &item.node {
                Selection::Field(field) => {
                    let field = &field.node;
                    if !aliased_deep || field.alias.is_some() {
                        self.seen += 1;
                        let name = field.name.node.as_str();
                        self.introspects |= name == "__schema" || name == "__type";
                    }
                    if aliased_deep {
                        self.count(&field.selection_set.node, true, path);
                    }
                }
                Selection::InlineFragment(fragment) => {
                    self.count(&fragment.node.selection_set.node, aliased_deep, path);
                }
                Selection::FragmentSpread(spread) => {
                    let name = &spread.node.fragment_name.node;
                    if path.contains(&name) {
                        continue;
                    }
                    if let Some(fragment) = self.fragments.get(name) {
                        path.push(name);
                        self.count(&fragment.node.selection_set.node, aliased_deep, path);
                        path.pop();
                    }
                }
            }
        }
    }
}

/// The operation a request runs: the one named, or the only one.
pub fn chosen_operation<'a>(
    document: &'a ExecutableDocument,
    name: Option<&str>,
) -> Option<&'a OperationDefinition> {
    match (&document.operations, name) {
        (DocumentOperations::Single(op), _) => Some(&op.node),
        (DocumentOperations::Multiple(ops), Some(name)) => ops.get(name).map(|op| &op.node),
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => {
            ops.values().next().map(|op| &op.node)
        }
        (DocumentOperations::Multiple(_), None) => None,
    }
}

/// The cost of a subscription's selection, which runs again for every event: every field
/// counts 1, and a connection its selection once per item of the largest page, whatever `first`
/// says (a count reads everything it counts, however few items it returns).
pub struct SubscriptionCost {
    /// The named type of each field, by (type, field), read from the schema.
    fields: HashMap<(String, String), String>,
    /// Highest cost accepted.
    max: usize,
    /// Largest page a connection may return.
    max_page_size: usize,
}

impl SubscriptionCost {
    /// The cost rule over a schema's SDL.
    pub fn new(sdl: &str, max: usize, max_page_size: usize) -> Self {
        use async_graphql::parser::types::{BaseType, Type, TypeKind, TypeSystemDefinition};
        fn named(ty: &Type) -> &str {
            match &ty.base {
                BaseType::Named(name) => name.as_str(),
                BaseType::List(inner) => named(inner),
            }
        }
        let mut fields = HashMap::new();
        let definitions = async_graphql::parser::parse_schema(sdl)
            .map(|document| document.definitions)
            .unwrap_or_default();
        for definition in definitions {
            let TypeSystemDefinition::Type(ty) = definition else {
                continue;
            };
            let ty = ty.node;
            let defined = match &ty.kind {
                TypeKind::Object(object) => &object.fields,
                TypeKind::Interface(interface) => &interface.fields,
                _ => continue,
            };
            for field in defined {
                let key = (ty.name.node.to_string(), field.node.name.node.to_string());
                fields.insert(key, named(&field.node.ty.node).to_owned());
            }
        }
        Self {
            fields,
            max,
            max_page_size,
        }
    }

    /// Refuses a subscription whose selection costs more than allowed (other operations pass).
    pub fn check(
        &self,
        document: &ExecutableDocument,
        name: Option<&str>,
    ) -> Result<(), ServerError> {
        let Some(operation) = chosen_operation(document, name) else {
            return Ok(());
        };
        if operation.ty != OperationType::Subscription {
            return Ok(());
        }
        let cost = self.cost(
            "Subscription",
            &operation.selection_set.node,
            &document.fragments,
            &mut Vec::new(),
        );
        if cost > self.max {
            return Err(too_big(format!(
                "a subscription's selection may cost at most {} (it runs again for every event; each field counts 1, a connection or a count as many times as the largest page of {}, whatever `first` says)",
                self.max, self.max_page_size
            )));
        }
        Ok(())
    }

    /// The cost of a selection on `ty`, stopping once over the limit.
    fn cost<'a>(
        &self,
        ty: &str,
        set: &'a SelectionSet,
        fragments: &'a HashMap<Name, Positioned<FragmentDefinition>>,
        path: &mut Vec<&'a Name>,
    ) -> usize {
        let mut total: usize = 0;
        for item in &set.items {
            if total > self.max {
                break;
            }
            let cost = match &item.node {
                Selection::Field(field) => {
                    let field = &field.node;
                    let key = (ty.to_owned(), field.name.node.to_string());
                    match self.fields.get(&key) {
                        Some(of) => {
                            let below = self.cost(of, &field.selection_set.node, fragments, path);
                            match of.ends_with("Connection") {
                                true => self.max_page_size.saturating_mul(below).saturating_add(1),
                                false => below.saturating_add(1),
                            }
                        }
                        None => 1,
                    }
                }
                Selection::InlineFragment(fragment) => {
                    let on = fragment
                        .node
                        .type_condition
                        .as_ref()
                        .map_or(ty, |c| c.node.on.node.as_str());
                    self.cost(on, &fragment.node.selection_set.node, fragments, path)
                }
                Selection::FragmentSpread(spread) => {
                    let name = &spread.node.fragment_name.node;
                    match fragments.get(name) {
                        Some(fragment) if !path.contains(&name) => {
                            path.push(name);
                            let on = fragment.node.type_condition.node.on.node.as_str();
                            let cost =
                                self.cost(on, &fragment.node.selection_set.node, fragments, path);
                            path.pop();
                            cost
                        }
                        _ => 0,
                    }
                }
            };
            total = total.saturating_add(cost);
        }
        total
    }
}

/// Counts the lexical tokens of a GraphQL document (punctuators, names, numbers, strings;
/// white space, commas and comments are not tokens), stopping once past `limit`.
pub fn count_tokens(source: &str, limit: usize) -> usize {
    let bytes = source.as_bytes();
    let mut i = 0;
    let mut tokens = 0;
    while i < bytes.len() && tokens <= limit {
        match bytes[i] {
            b' ' | b'\t' | b'\n' | b'\r' | b',' => i += 1,
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' && bytes[i] != b'\r' {
                    i += 1;
                }
            }
            b'.' if bytes[i..].starts_with(b"...") => {
                tokens += 1;
                i += 3;
            }
            b'"' if bytes[i..].starts_with(b"\"\"\"") => {
                tokens += 1;
                i += 3;
                while i < bytes.len() && !bytes[i..].starts_with(b"\"\"\"") {
                    i += if bytes[i..].starts_with(b"\\\"\"\"") {
                        4
                    } else {
                        1
                    };
                }
                i += 3;
            }
            b'"' => {
                tokens += 1;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' => {
                tokens += 1;
                i += 1;
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || matches!(bytes[i], b'_' | b'.' | b'+'))
                {
                    i += 1;
                }
            }
            _ => {
                // A punctuator, or a character the parser will refuse: one token either way.
                tokens += 1;
                i += source[i..].chars().next().map_or(1, char::len_utf8);
            }
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_counted_like_a_lexer_does() {
        assert_eq!(count_tokens("{ a }", 100), 3);
        assert_eq!(
            count_tokens("query Q($x: Int = -1.5e3) { a(x: $x) }", 100),
            19
        );
        assert_eq!(count_tokens("{ a(s: \"x y, \\\" z\") } # c, d e", 100), 8);
        assert_eq!(count_tokens("{ ...F } fragment F on T { a }", 100), 11);
        assert_eq!(count_tokens("{ a(s: \"\"\"multi\nline \"\"\") }", 100), 8);
        assert_eq!(count_tokens(&"{ a }".repeat(1000), 10), 11);
    }

    #[test]
    fn subscriptions_cost_connections_at_their_largest_page() {
        let sdl = crate::graphql::sdl();
        let rule = SubscriptionCost::new(&sdl, 50, 100);
        let check = |query: &str| {
            let document = async_graphql::parser::parse_query(query).unwrap();
            rule.check(&document, None).map_err(|e| e.message)
        };
        assert!(check("subscription { commentPosted(discussionId: \"x\") { slug text author { name } parent { slug parent { slug } } } }").is_ok());
        for costly in [
            "subscription { commentPosted(discussionId: \"x\") { parent { subDiscussion(first: 0) { totalCount } } } }",
            "subscription { commentPosted(discussionId: \"x\") { ... on Comment { replies(first: 1) { nodes { slug } } } } }",
            "subscription { commentChanged(discussionId: \"x\") { ...F } } fragment F on Comment { subDiscussion { pageInfo { hasNextPage } } }",
        ] {
            let refused = check(costly).unwrap_err();
            assert!(refused.contains("at most 50"), "{refused}");
        }
        // Queries and mutations are left to the general limit; a fragment cycle ends the walk.
        assert!(check("{ discussion(id: \"x\") { comments { totalCount } } }").is_ok());
        assert!(check("subscription { commentPosted(discussionId: \"x\") { ...A } } fragment A on Comment { ...A slug }").is_ok());
    }
}
