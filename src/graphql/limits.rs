//! Limits on the shape of a GraphQL document, checked by an engine extension before anything is
//! executed: lexical tokens (before parsing), aliased fields and root fields (after parsing, with
//! fragments expanded). Depth and cost are the engine's own `limit_depth`/`limit_complexity`,
//! with connection fields costed by their page size (see `page_cost`). The same extension gives
//! the errors of each stage the code clients and gateways know (Apollo's names).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextParseQuery, NextPrepareRequest,
    NextValidation,
};
use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, FragmentDefinition, Selection, SelectionSet,
};
use async_graphql::{Name, Pos, Positioned, ServerError, ServerResult, Variables};
use async_graphql::{Request, ValidationResult};

use crate::domain::paging::DEFAULT_PAGE_SIZE;

/// The cost of a connection field: its selection once per item it may return (`first`, or the
/// default page size), plus the field itself.
pub fn page_cost(first: Option<i32>, child_complexity: usize) -> usize {
    let items = first.map_or(DEFAULT_PAGE_SIZE, |n| usize::try_from(n).unwrap_or(0));
    items.saturating_mul(child_complexity).saturating_add(1)
}

/// The document limits, from config.
#[derive(Debug, Clone, Copy)]
pub struct DocumentLimits {
    /// Most lexical tokens.
    pub max_tokens: usize,
    /// Most aliased fields, fragments expanded.
    pub max_aliases: usize,
    /// Most fields at the root of an operation, fragments expanded.
    pub max_root_fields: usize,
    /// Whether `__schema` and `__type` may be asked for.
    pub introspection: bool,
}

impl ExtensionFactory for DocumentLimits {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(Checks {
            limits: *self,
            variable_arguments: Mutex::default(),
        })
    }
}

/// The checks of one request: the limits, and where its document passes a variable as an
/// argument (so a value that does not fit is told apart as a variable's).
struct Checks {
    limits: DocumentLimits,
    variable_arguments: Mutex<HashSet<Pos>>,
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

#[async_trait::async_trait]
impl Extension for Checks {
    async fn prepare_request(
        &self,
        ctx: &ExtensionContext<'_>,
        request: Request,
        next: NextPrepareRequest<'_>,
    ) -> ServerResult<Request> {
        // Counted here, before a persisted-query extension registered after this one parses it.
        if count_tokens(&request.query, self.limits.max_tokens) > self.limits.max_tokens {
            return Err(too_big(format!(
                "the document has more than {} tokens",
                self.limits.max_tokens
            )));
        }
        next.run(ctx, request).await.map_err(|e| {
            let code = match e.message.as_str() {
                "PersistedQueryNotFound" => "PERSISTED_QUERY_NOT_FOUND",
                _ => "BAD_USER_INPUT",
            };
            with_code(e, code)
        })
    }

    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let document = next
            .run(ctx, query, variables)
            .await
            .map_err(|e| with_code(e, "GRAPHQL_PARSE_FAILED"))?;
        if ctx.data_opt::<ReadOnly>().is_some() && has_mutation(&document) {
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
        let mut aliases = Walk::new(&document.fragments, self.limits.max_aliases);
        for set in &operations {
            let mut roots = Walk::new(&document.fragments, self.limits.max_root_fields);
            roots.count(set, false, &mut Vec::new());
            if !self.limits.introspection && roots.introspects {
                return Err(with_code(
                    ServerError::new("introspection is turned off on this server", None),
                    "GRAPHQL_VALIDATION_FAILED",
                ));
            }
            if roots.over() {
                return Err(too_big(format!(
                    "an operation selects more than {} root fields",
                    self.limits.max_root_fields
                )));
            }
            aliases.count(set, true, &mut Vec::new());
            if aliases.over() {
                return Err(too_big(format!(
                    "the document has more than {} aliased fields",
                    self.limits.max_aliases
                )));
            }
        }
        *self
            .variable_arguments
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = variable_arguments(&document);
        Ok(document)
    }

    async fn validation(
        &self,
        ctx: &ExtensionContext<'_>,
        next: NextValidation<'_>,
    ) -> Result<ValidationResult, Vec<ServerError>> {
        next.run(ctx).await.map_err(|errors| {
            // A variable whose value does not fit its type is bad input, not a bad document:
            // the engine reports it at the argument the variable is passed to.
            let variable_arguments = self
                .variable_arguments
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let variables = errors.iter().any(|e| {
                e.message.to_ascii_lowercase().contains("variable")
                    || (e.message.starts_with("Invalid value for argument")
                        && e.locations.iter().any(|at| variable_arguments.contains(at)))
            });
            let code = match variables {
                true => "BAD_USER_INPUT",
                false => "GRAPHQL_VALIDATION_FAILED",
            };
            errors.into_iter().map(|e| with_code(e, code)).collect()
        })
    }
}

/// Marks a request that must not write (an HTTP GET): a document with a mutation is refused,
/// also when it arrives by persisted-query hash.
pub struct ReadOnly;

fn has_mutation(document: &ExecutableDocument) -> bool {
    use async_graphql::parser::types::OperationType;
    let is_mutation = |op: &Positioned<async_graphql::parser::types::OperationDefinition>| {
        op.node.ty == OperationType::Mutation
    };
    match &document.operations {
        DocumentOperations::Single(op) => is_mutation(op),
        DocumentOperations::Multiple(ops) => ops.values().any(is_mutation),
    }
}

/// The error with `code` in its extensions, unless it has a code already.
fn with_code(mut error: ServerError, code: &str) -> ServerError {
    let extensions = error.extensions.get_or_insert_with(Default::default);
    if extensions.get("code").is_none() {
        extensions.set("code", code);
    }
    error
}

fn too_big(message: String) -> ServerError {
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
    fn connections_cost_per_item() {
        assert_eq!(page_cost(Some(100), 3), 301);
        assert_eq!(page_cost(None, 3), DEFAULT_PAGE_SIZE * 3 + 1);
        assert_eq!(page_cost(Some(-5), 3), 1);
    }
}
