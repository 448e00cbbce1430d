//! Creates the table from `singlet_shared::schema`, for the local runner and the tests; on AWS,
//! `template.yaml` declares the same table (a test keeps the two equal).

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use singlet_shared::schema::{self, INDEXES, PK, SK, TTL_ATTRIBUTE};

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

/// Creates `table` unless it exists. Returns whether it created it.
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
    let attributes = schema::key_attributes().into_iter().map(|name| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .expect("complete")
    });
    let indexes = INDEXES.iter().map(|index| {
        let projection = match index.projection {
            schema::Projection::All => ProjectionType::All,
            schema::Projection::KeysOnly => ProjectionType::KeysOnly,
        };
        GlobalSecondaryIndex::builder()
            .index_name(index.name)
            .set_key_schema(Some(key_schema(index.pk, index.sk)))
            .projection(Projection::builder().projection_type(projection).build())
            .build()
            .expect("complete")
    });
    client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .set_attribute_definitions(Some(attributes.collect()))
        .set_key_schema(Some(key_schema(PK, SK)))
        .set_global_secondary_indexes(Some(indexes.collect()))
        .send()
        .await?;
    client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name(TTL_ATTRIBUTE)
                .build()?,
        )
        .send()
        .await?;
    Ok(true)
}
