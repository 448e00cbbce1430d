//! Creates the table from `singlet_shared::schema`, for the local runner, its tools and the tests,
//! and adds the indexes a local table made by an older singlet lacks; on AWS, `template.yaml`
//! declares the same table (a test keeps the two equal), its stream included.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, CreateGlobalSecondaryIndexAction, GlobalSecondaryIndex,
    GlobalSecondaryIndexUpdate, KeySchemaElement, KeyType, Projection, ProjectionType,
    ScalarAttributeType, StreamSpecification, StreamViewType, TimeToLiveSpecification,
};
use singlet_shared::schema::{self, INDEXES, Index, PK, SK, TTL_ATTRIBUTE};

fn key_schema(pk: &str, sk: &str) -> Vec<KeySchemaElement> {
    [(pk, KeyType::Hash), (sk, KeyType::Range)]
        .into_iter()
        .map(|(name, kind)| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(kind)
                .build()
                .expect("complete")
        })
        .collect()
}

/// Whether `table` exists (`DescribeTable` answers, or says `ResourceNotFoundException`).
pub async fn table_exists(client: &Client, table: &str) -> Result<bool, aws_sdk_dynamodb::Error> {
    match client.describe_table().table_name(table).send().await {
        Ok(_) => Ok(true),
        Err(error) => match aws_sdk_dynamodb::Error::from(error) {
            aws_sdk_dynamodb::Error::ResourceNotFoundException(_) => Ok(false),
            other => Err(other),
        },
    }
}

/// The table's stream as the template declares it, with the view the event-source mapping reads
/// (`events::mapping::STREAM_VIEW_TYPE`).
pub fn stream_specification() -> StreamSpecification {
    StreamSpecification::builder()
        .stream_enabled(true)
        .stream_view_type(StreamViewType::from(
            crate::events::mapping::STREAM_VIEW_TYPE,
        ))
        .build()
        .expect("complete")
}

/// The table's key schema, attribute definitions and indexes, as [`ensure_table`] creates them
/// and `template.yaml` declares them; also what `load --s3` gives DynamoDB's `ImportTable`, which
/// creates the table itself (singlet_tools::on_aws).
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    pub attribute_definitions: Vec<AttributeDefinition>,
    pub key_schema: Vec<KeySchemaElement>,
    pub global_secondary_indexes: Vec<GlobalSecondaryIndex>,
}

/// The table's [`Definition`], from `singlet_shared::schema`.
pub fn definition() -> Definition {
    let indexes = INDEXES.iter().map(|index| {
        GlobalSecondaryIndex::builder()
            .index_name(index.name)
            .set_key_schema(Some(key_schema(index.pk, index.sk)))
            .projection(projection(index))
            .build()
            .expect("complete")
    });
    Definition {
        attribute_definitions: schema::key_attributes()
            .into_iter()
            .map(attribute)
            .collect(),
        key_schema: key_schema(PK, SK),
        global_secondary_indexes: indexes.collect(),
    }
}

/// The table's TTL as the template declares it: on, on [`TTL_ATTRIBUTE`].
pub fn time_to_live() -> TimeToLiveSpecification {
    TimeToLiveSpecification::builder()
        .enabled(true)
        .attribute_name(TTL_ATTRIBUTE)
        .build()
        .expect("complete")
}

/// Creates `table` unless it exists, its stream on from its first write. Returns whether it
/// created it.
///
/// Whoever creates it (the runner, `seed`, `import`, `load`, `invoke`), every outbox item is
/// then on the stream, which the runner reads from its oldest record when it serves: a table
/// made without one, its stream switched on later, started with an empty stream, and the events
/// of every change written before were never published.
pub async fn ensure_table(client: &Client, table: &str) -> Result<bool, aws_sdk_dynamodb::Error> {
    if client
        .describe_table()
        .table_name(table)
        .send()
        .await
        .is_ok()
    {
        return Ok(false);
    }
    let definition = definition();
    client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .set_attribute_definitions(Some(definition.attribute_definitions))
        .set_key_schema(Some(definition.key_schema))
        .set_global_secondary_indexes(Some(definition.global_secondary_indexes))
        .stream_specification(stream_specification())
        .send()
        .await?;
    client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(time_to_live())
        .send()
        .await?;
    Ok(true)
}

/// Adds to an existing `table` every index of the schema it lacks (one `UpdateTable` each, as
/// DynamoDB takes them), its items backfilled by the engine: a local table made by an older
/// singlet gains the indexes of the newer one. Returns the names of the indexes added.
pub async fn add_missing_indexes(
    client: &Client,
    table: &str,
) -> Result<Vec<&'static str>, aws_sdk_dynamodb::Error> {
    let described = client.describe_table().table_name(table).send().await?;
    let existing: Vec<String> = described
        .table()
        .map(|t| {
            t.global_secondary_indexes()
                .iter()
                .filter_map(|i| i.index_name().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut added = Vec::new();
    for index in INDEXES
        .iter()
        .filter(|i| !existing.iter().any(|e| e == i.name))
    {
        let create = CreateGlobalSecondaryIndexAction::builder()
            .index_name(index.name)
            .set_key_schema(Some(key_schema(index.pk, index.sk)))
            .projection(projection(index))
            .build()?;
        client
            .update_table()
            .table_name(table)
            .attribute_definitions(attribute(index.pk))
            .attribute_definitions(attribute(index.sk))
            .global_secondary_index_updates(
                GlobalSecondaryIndexUpdate::builder().create(create).build(),
            )
            .send()
            .await?;
        added.push(index.name);
    }
    Ok(added)
}

fn attribute(name: &str) -> AttributeDefinition {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .expect("complete")
}

fn projection(index: &Index) -> Projection {
    let projection = match index.projection {
        schema::Projection::All => ProjectionType::All,
        schema::Projection::KeysOnly => ProjectionType::KeysOnly,
    };
    Projection::builder().projection_type(projection).build()
}
