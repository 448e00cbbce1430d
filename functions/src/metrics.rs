//! CloudWatch metrics in the Embedded Metric Format (EMF): one invocation's figures, printed as
//! one JSON line on standard output, which Lambda sends to the function's log group, where
//! CloudWatch turns it into metrics. No `PutMetricData` call, no agent, no extra latency.
//!
//! ```text
//! {"_aws":{"Timestamp":1764580000000,"CloudWatchMetrics":[{"Namespace":"singlet",
//!   "Dimensions":[["Function","Route"]],"Metrics":[{"Name":"2xx","Unit":"Count"},
//!   {"Name":"Latency","Unit":"Milliseconds"}]}]},
//!  "Function":"register-vehicle","Route":"POST /vehicles","2xx":1,"Latency":[12.5]}
//! ```
//!
//! A [`Metrics`] collects one invocation: counters add up ([`Metrics::count`]), values are kept
//! one by one ([`Metrics::value`]), and [`Metrics::flush`] prints the line and starts again.
//! The named helpers are the figures the service reports: requests by status class, conflicts
//! and precondition failures by code, consumed read and write units and latency for a route; a
//! scheduled run's duration, next to the counts its report names (`crate::report::RunReport`).
//!
//! One dimension set per line (`Function`, or `Function` and `Route`): every metric name times
//! every function is a custom metric that CloudWatch bills, so each figure is reported once.
//!
//! The specification: <https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html>

use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The CloudWatch namespace of every metric the service writes.
pub const NAMESPACE: &str = "singlet";
/// The dimension that names the function (`register-vehicle`).
pub const FUNCTION: &str = "Function";
/// The dimension that names the route (`POST /vehicles`), when there is one.
pub const ROUTE: &str = "Route";

/// EMF's limits: metrics in one directive, values of one metric, length of a metric name.
const MAX_METRICS_PER_DIRECTIVE: usize = 100;
const MAX_VALUES: usize = 100;
const MAX_NAME_LEN: usize = 255;

/// The units the service uses (EMF takes CloudWatch's `StandardUnit` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Milliseconds,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Milliseconds => "Milliseconds",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Figure {
    /// A counter: one number, the sum of what was counted.
    Sum(u64),
    /// Separate observations (latencies), at most [`MAX_VALUES`].
    Values(Vec<f64>),
}

/// One invocation's metrics, written as one EMF line by [`Metrics::flush`].
#[derive(Debug, Clone)]
pub struct Metrics {
    function: String,
    route: Option<String>,
    figures: BTreeMap<String, (Unit, Figure)>,
    properties: Map<String, Value>,
}

impl Metrics {
    /// The metrics of one run of `function` (a route's, `register-vehicle`, or a scheduled one).
    pub fn new(function: &str) -> Self {
        Self {
            function: function.to_owned(),
            route: None,
            figures: BTreeMap::new(),
            properties: Map::new(),
        }
    }

    /// The metrics of one request to `route` (`POST /vehicles`), served by `function`.
    pub fn for_route(function: &str, route: &str) -> Self {
        Self {
            route: Some(route.to_owned()),
            ..Self::new(function)
        }
    }

    /// Adds `n` to the counter `name`.
    pub fn count(&mut self, name: &str, n: u64) -> &mut Self {
        if !self.valid_name(name) {
            return self;
        }
        let entry = self
            .figures
            .entry(name.to_owned())
            .or_insert((Unit::Count, Figure::Sum(0)));
        match entry {
            (_, Figure::Sum(sum)) => *sum = sum.saturating_add(n),
            // Recorded as values before: count it as one more value.
            (_, Figure::Values(values)) if values.len() < MAX_VALUES => values.push(n as f64),
            _ => {}
        }
        self
    }

    /// Records one observation of `name` (a latency, a duration). Not-a-number and infinities
    /// are dropped (JSON cannot carry them), and so is any value past EMF's 100 per metric.
    pub fn value(&mut self, name: &str, unit: Unit, value: f64) -> &mut Self {
        if !self.valid_name(name) || !value.is_finite() {
            return self;
        }
        let entry = self
            .figures
            .entry(name.to_owned())
            .or_insert((unit, Figure::Values(Vec::new())));
        match entry {
            (_, Figure::Values(values)) if values.len() < MAX_VALUES => values.push(value),
            (_, Figure::Values(_)) => {}
            // A counter of that name already: add the value to it when it is a whole count.
            (_, Figure::Sum(sum)) if value >= 0.0 && value.fract() == 0.0 => {
                *sum = sum.saturating_add(value as u64)
            }
            (_, Figure::Sum(_)) => {}
        }
        self
    }

    /// Records a duration in milliseconds.
    pub fn milliseconds(&mut self, name: &str, duration: Duration) -> &mut Self {
        self.value(name, Unit::Milliseconds, duration.as_secs_f64() * 1000.0)
    }

    /// Adds a member that is logged with the metrics but is not one (a request id, a trace id):
    /// searchable in CloudWatch Logs Insights, free of metric charges. A key that is a
    /// dimension, a metric or `_aws` is ignored.
    pub fn property(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        if key != "_aws" && key != FUNCTION && key != ROUTE && !self.figures.contains_key(key) {
            self.properties.insert(key.to_owned(), value.into());
        }
        self
    }

    // ---- The service's figures -----------------------------------------------------------

    /// One answered request, counted by status class: `2xx`, `4xx`, `5xx` (and `3xx`, `1xx`).
    pub fn request(&mut self, status: u16) -> &mut Self {
        match status {
            100..=599 => self.count(&format!("{}xx", status / 100), 1),
            _ => self,
        }
    }

    /// A `409`, once per field error code it names (`taken`, `unavailable`, `limit_reached`...):
    /// metric `Conflict.<code>`.
    pub fn conflict(&mut self, code: &str) -> &mut Self {
        self.count(&format!("Conflict.{code}"), 1)
    }

    /// A `412` or `428`, by its problem type (`precondition-failed`, `precondition-required`):
    /// metric `PreconditionFailed.<code>`.
    pub fn precondition_failed(&mut self, code: &str) -> &mut Self {
        self.count(&format!("PreconditionFailed.{code}"), 1)
    }

    /// Capacity units a request consumed (`ConsumedCapacity`), added up over the invocation.
    pub fn consumed(&mut self, read_units: f64, write_units: f64) -> &mut Self {
        self.add_units("ConsumedReadCapacityUnits", read_units);
        self.add_units("ConsumedWriteCapacityUnits", write_units)
    }

    /// The time from the request's arrival to its answer.
    pub fn latency(&mut self, latency: Duration) -> &mut Self {
        self.milliseconds("Latency", latency)
    }

    /// How long a scheduled run took.
    pub fn duration(&mut self, duration: Duration) -> &mut Self {
        self.milliseconds("Duration", duration)
    }

    /// The invocation that started its instance: `ColdStart` (1), as Powertools reports it.
    pub fn cold_start(&mut self) -> &mut Self {
        self.count("ColdStart", 1)
    }

    // ---- Writing -------------------------------------------------------------------------

    /// Nothing recorded yet (or since the last flush).
    pub fn is_empty(&self) -> bool {
        self.figures.is_empty()
    }

    /// The EMF document of what was recorded, stamped `timestamp_ms` (epoch milliseconds), as
    /// one line of JSON; `None` when nothing was recorded.
    pub fn to_line(&self, timestamp_ms: u64) -> Option<String> {
        if self.figures.is_empty() {
            return None;
        }
        let mut dimensions = vec![FUNCTION];
        if self.route.is_some() {
            dimensions.push(ROUTE);
        }
        let definitions: Vec<Value> = self
            .figures
            .iter()
            .map(|(name, (unit, _))| json!({"Name": name, "Unit": unit.as_str()}))
            .collect();
        let directives: Vec<Value> = definitions
            .chunks(MAX_METRICS_PER_DIRECTIVE)
            .map(|metrics| {
                json!({
                    "Namespace": NAMESPACE,
                    "Dimensions": [dimensions],
                    "Metrics": metrics,
                })
            })
            .collect();

        let mut document = self.properties.clone();
        document.insert(
            "_aws".into(),
            json!({"Timestamp": timestamp_ms, "CloudWatchMetrics": directives}),
        );
        document.insert(FUNCTION.into(), self.function.clone().into());
        if let Some(route) = &self.route {
            document.insert(ROUTE.into(), route.clone().into());
        }
        for (name, (_, figure)) in &self.figures {
            let value = match figure {
                Figure::Sum(sum) => json!(sum),
                Figure::Values(values) => json!(values),
            };
            document.insert(name.clone(), value);
        }
        Some(Value::Object(document).to_string())
    }

    /// Prints the line on standard output (one write, so it is never interleaved with other
    /// output) and starts afresh; prints nothing when nothing was recorded.
    pub fn flush(&mut self) {
        let timestamp_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or_default();
        if let Some(mut line) = self.to_line(timestamp_ms) {
            line.push('\n');
            // Metrics never fail a request: a closed stdout loses them, nothing else.
            let _ = std::io::stdout().lock().write_all(line.as_bytes());
        }
        self.figures.clear();
        self.properties.clear();
    }

    fn add_units(&mut self, name: &str, units: f64) -> &mut Self {
        if !self.valid_name(name) || !units.is_finite() || units < 0.0 {
            return self;
        }
        // Capacity comes in halves (eventually consistent reads): a sum of f64, one value.
        let entry = self
            .figures
            .entry(name.to_owned())
            .or_insert((Unit::Count, Figure::Values(vec![0.0])));
        if let (_, Figure::Values(values)) = entry {
            match values.first_mut() {
                Some(total) => *total += units,
                None => values.push(units),
            }
        }
        self
    }

    fn valid_name(&self, name: &str) -> bool {
        !name.trim().is_empty()
            && name.len() <= MAX_NAME_LEN
            && name != "_aws"
            && name != FUNCTION
            && name != ROUTE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNITS: &[&str] = &[
        "Seconds",
        "Microseconds",
        "Milliseconds",
        "Bytes",
        "Kilobytes",
        "Megabytes",
        "Gigabytes",
        "Terabytes",
        "Bits",
        "Kilobits",
        "Megabits",
        "Gigabits",
        "Terabits",
        "Percent",
        "Count",
        "Bytes/Second",
        "Kilobytes/Second",
        "Megabytes/Second",
        "Gigabytes/Second",
        "Terabytes/Second",
        "Bits/Second",
        "Kilobits/Second",
        "Megabits/Second",
        "Gigabits/Second",
        "Terabits/Second",
        "Count/Second",
        "None",
    ];

    /// Parses an EMF line and checks it against the specification; returns the document.
    fn valid_emf(line: &str) -> Map<String, Value> {
        assert!(!line.contains('\n'), "one line: {line}");
        let document: Value = serde_json::from_str(line).expect("the line is JSON");
        let root = document.as_object().expect("the root is an object").clone();
        let aws = root["_aws"].as_object().expect("_aws is an object");
        assert!(aws["Timestamp"].is_u64(), "Timestamp is epoch milliseconds");
        let directives = aws["CloudWatchMetrics"].as_array().unwrap();
        assert!(!directives.is_empty());
        for directive in directives {
            assert_eq!(directive["Namespace"], NAMESPACE);
            let namespace = directive["Namespace"].as_str().unwrap();
            assert!(!namespace.is_empty() && namespace.len() <= 1024);
            for set in directive["Dimensions"].as_array().unwrap() {
                let set = set.as_array().expect("a dimension set is an array");
                assert!(set.len() <= 30, "at most 30 dimensions in a set");
                for key in set {
                    let key = key.as_str().expect("a dimension is named by a string");
                    let value = root[key].as_str().expect("a dimension's value is a string");
                    assert!(!value.is_empty() && value.len() <= 1024);
                }
            }
            let metrics = directive["Metrics"].as_array().unwrap();
            assert!(!metrics.is_empty() && metrics.len() <= 100);
            for metric in metrics {
                let name = metric["Name"].as_str().expect("a metric has a Name");
                assert!(!name.is_empty() && name.len() <= 255);
                let unit = metric["Unit"].as_str().expect("our metrics carry a Unit");
                assert!(UNITS.contains(&unit), "{unit} is a CloudWatch unit");
                match &root[name] {
                    Value::Number(_) => {}
                    Value::Array(values) => {
                        assert!(!values.is_empty() && values.len() <= 100);
                        assert!(values.iter().all(Value::is_number), "{name}: numbers only");
                    }
                    other => panic!("{name}: a metric's value is a number or numbers: {other}"),
                }
            }
        }
        root
    }

    fn names(root: &Map<String, Value>) -> Vec<String> {
        root["_aws"]["CloudWatchMetrics"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|d| d["Metrics"].as_array().unwrap().clone())
            .map(|m| m["Name"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn a_request_is_one_valid_line() {
        let mut metrics = Metrics::for_route("register-vehicle", "POST /vehicles");
        metrics
            .request(201)
            .latency(Duration::from_micros(12_500))
            .consumed(0.5, 3.0)
            .consumed(1.0, 0.0)
            .property("requestId", "abc-123");
        let line = metrics.to_line(1_764_580_000_000).unwrap();
        let root = valid_emf(&line);
        assert_eq!(root["_aws"]["Timestamp"], 1_764_580_000_000u64);
        let directive = &root["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Dimensions"], json!([["Function", "Route"]]));
        assert_eq!(root["Function"], "register-vehicle");
        assert_eq!(root["Route"], "POST /vehicles");
        assert_eq!(root["2xx"], 1);
        assert_eq!(root["Latency"], json!([12.5]));
        assert_eq!(root["ConsumedReadCapacityUnits"], json!([1.5]));
        assert_eq!(root["ConsumedWriteCapacityUnits"], json!([3.0]));
        assert_eq!(root["requestId"], "abc-123");
        assert!(
            !names(&root).contains(&"requestId".to_owned()),
            "a property is no metric"
        );
        let units: BTreeMap<String, String> = directive["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["Name"].as_str().unwrap().into(),
                    m["Unit"].as_str().unwrap().into(),
                )
            })
            .collect();
        assert_eq!(units["Latency"], "Milliseconds");
        assert_eq!(units["2xx"], "Count");
    }

    #[test]
    fn statuses_count_by_class_and_failures_by_code() {
        let mut metrics = Metrics::for_route("checkout-book", "POST /checkouts");
        for status in [200, 201, 204, 400, 404, 409, 503, 99, 600] {
            metrics.request(status);
        }
        metrics
            .conflict("unavailable")
            .conflict("limit_reached")
            .conflict("unavailable")
            .precondition_failed("precondition-failed")
            .precondition_failed("precondition-required");
        let root = valid_emf(&metrics.to_line(1).unwrap());
        assert_eq!(root["2xx"], 3);
        assert_eq!(root["4xx"], 3);
        assert_eq!(root["5xx"], 1);
        assert!(!root.contains_key("0xx") && !root.contains_key("6xx"));
        assert_eq!(root["Conflict.unavailable"], 2);
        assert_eq!(root["Conflict.limit_reached"], 1);
        assert_eq!(root["PreconditionFailed.precondition-failed"], 1);
        assert_eq!(root["PreconditionFailed.precondition-required"], 1);
    }

    #[test]
    fn a_scheduled_run_reports_its_counts() {
        let mut metrics = Metrics::new("a-scheduled-run");
        metrics
            .count("PagesRead", 16)
            .count("PagesRead", 1)
            .count("Done", 40)
            .duration(Duration::from_millis(850));
        let root = valid_emf(&metrics.to_line(1).unwrap());
        assert_eq!(
            root["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Function"]])
        );
        assert!(!root.contains_key("Route"));
        assert_eq!(root["Function"], "a-scheduled-run");
        assert_eq!(root["PagesRead"], 17);
        assert_eq!(root["Done"], 40);
        assert_eq!(root["Duration"], json!([850.0]));
    }

    #[test]
    fn a_cold_start_is_counted() {
        let mut metrics = Metrics::for_route("get-vehicle", "GET /vehicles/{vehicleId}");
        metrics.cold_start().request(200);
        let root = valid_emf(&metrics.to_line(1).unwrap());
        assert_eq!(root["ColdStart"], 1);
        assert!(names(&root).contains(&"ColdStart".to_owned()));
    }

    #[test]
    fn nothing_recorded_writes_nothing_and_flush_starts_afresh() {
        let mut metrics = Metrics::new("get-vehicle");
        assert!(metrics.is_empty());
        assert_eq!(metrics.to_line(1), None);
        metrics.property("requestId", "r1");
        assert_eq!(metrics.to_line(1), None, "properties alone are no metrics");
        metrics.request(200);
        metrics.flush();
        assert!(metrics.is_empty());
        assert_eq!(metrics.to_line(1), None);
    }

    #[test]
    fn emf_limits_hold() {
        let mut metrics = Metrics::new("f");
        for i in 0..150 {
            metrics.count(&format!("m{i:03}"), 1);
        }
        for i in 0..150 {
            metrics.value("Latency", Unit::Milliseconds, f64::from(i));
        }
        metrics
            .value("Latency", Unit::Milliseconds, f64::NAN)
            .value("Other", Unit::Milliseconds, f64::INFINITY)
            .count("", 1)
            .count(&"x".repeat(256), 1)
            .count("_aws", 1)
            .count(FUNCTION, 1);
        let root = valid_emf(&metrics.to_line(1).unwrap());
        let directives = root["_aws"]["CloudWatchMetrics"].as_array().unwrap();
        assert_eq!(directives.len(), 2, "151 metrics take two directives");
        assert_eq!(names(&root).len(), 151);
        assert_eq!(root["Latency"].as_array().unwrap().len(), 100);
        assert!(!root.contains_key("Other"));
        assert_eq!(root["Function"], "f");
    }

    #[test]
    fn a_property_never_shadows_a_dimension_or_a_metric() {
        let mut metrics = Metrics::for_route("get-book", "GET /books/{isbn}");
        metrics.request(200);
        metrics
            .property("Function", "other")
            .property("Route", "other")
            .property("2xx", "other")
            .property("_aws", "other");
        let root = valid_emf(&metrics.to_line(1).unwrap());
        assert_eq!(root["Function"], "get-book");
        assert_eq!(root["Route"], "GET /books/{isbn}");
        assert_eq!(root["2xx"], 1);
    }
}
