//! The fleet registry: docs/API.md, "Fleet registry".

use crate::both;
use crate::harness::{Api, Mode, Reply, s};
use serde_json::json;

async fn register(api: &Api, plate: &str, chassis: &str) -> Reply {
    api.post(
        "/vehicles",
        json!({"plate": plate, "chassis": chassis, "depot": "north"}),
    )
    .await
}

both!(
    register_returns_the_normalised_vehicle_and_writes_three_items,
    register_names_every_bad_field,
    register_names_every_taken_value,
    lookups_by_any_spelling,
    reads_of_missing_things_are_404,
    change_plate_frees_the_old_plate_at_once,
    change_plate_to_a_taken_plate_is_409,
    change_plate_to_another_spelling_of_its_own_plate_keeps_its_lock,
    retire_removes_the_vehicle_and_both_locks,
    separators_are_formatting_and_other_scripts_are_refused,
    a_depots_vehicles_are_paged_newest_first_and_only_its_own,
    a_vehicle_whose_plate_lock_is_lost_is_a_500_naming_fsck_not_a_retry,
);

/// A vehicle whose plate lock is gone (a torn restore, a hand edit: fsck's `lock-missing`):
/// changing its plate or retiring it cannot be done as the table stands, and no retry mends it,
/// so it is a `500` whose log names `fsck` (it was a `503` "retry shortly" for good, with no log
/// line), and nothing is written.
async fn a_vehicle_whose_plate_lock_is_lost_is_a_500_naming_fsck_not_a_retry(api: Api) {
    let reply = register(&api, "LOST-1", "LOSTC-1").await;
    assert_eq!(reply.status, 201, "{reply:?}");
    let id = reply.body["vehicleId"].as_str().unwrap().to_owned();
    crate::harness::delete_raw(&api.ctx, "PLATE#lost1", "PLATE#lost1").await;
    let before = api.items().await;

    let changed = api
        .put(format!("/vehicles/{id}/plate"), json!({"plate": "LOST-2"}))
        .await;
    assert_eq!(changed.status, 500, "{changed:?}");
    let retired = api.delete(format!("/vehicles/{id}")).await;
    assert_eq!(retired.status, 500, "{retired:?}");
    assert_eq!(api.items().await, before, "nothing is written");
    let logged = crate::logs::captured();
    for said in [
        "the vehicle's plate lock is missing or names another vehicle: `singlet fsck` finds it",
        "a lock of this vehicle is missing or names another vehicle: `singlet fsck` finds it",
    ] {
        assert!(
            logged
                .lines()
                .any(|line| line.contains(said) && line.contains(&id)),
            "no line says {said:?} of {id}"
        );
    }
}

/// `GET /depots/{depot}/vehicles`: the depot folded as plates are, newest first, paged with a
/// cursor that belongs to its depot; a depot with no vehicles is an empty page, a blank one `400`.
async fn a_depots_vehicles_are_paged_newest_first_and_only_its_own(api: Api) {
    let mut north = Vec::new();
    for (plate, depot) in [
        ("D-1", "North"),
        ("D-2", " north "),
        ("D-3", "west"),
        ("D-4", "NORTH"),
    ] {
        let reply = api
            .post(
                "/vehicles",
                json!({"plate": plate, "chassis": format!("C{plate}"), "depot": depot}),
            )
            .await;
        assert_eq!(reply.status, 201, "{reply:?}");
        if depot.trim().eq_ignore_ascii_case("north") {
            let id = reply.body["vehicleId"].as_str().unwrap().to_owned();
            north.push((reply.body["addedAt"].as_i64().unwrap(), id));
        }
    }
    // Newest first: by `addedAt`, then (registered in the same millisecond) by id, as the
    // index's sort key `<addedAt>#<vehicleId>` orders them.
    north.sort();
    let north: Vec<String> = north.into_iter().rev().map(|(_, id)| id).collect();
    let first = api.get("/depots/north/vehicles?limit=2").await;
    assert_eq!(first.status, 200, "{first:?}");
    let ids = |reply: &crate::harness::Reply| -> Vec<String> {
        reply.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["vehicleId"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&first), [north[0].clone(), north[1].clone()]);
    let cursor = first.body["nextCursor"].as_str().unwrap().to_owned();
    let second = api
        .get(format!("/depots/NORTH/vehicles?limit=2&cursor={cursor}"))
        .await;
    assert_eq!(second.status, 200, "{second:?}");
    assert_eq!(ids(&second), [north[2].clone()]);
    assert_eq!(second.body["nextCursor"], serde_json::Value::Null);
    // The cursor names its depot: another depot's list refuses it.
    api.get(format!("/depots/west/vehicles?cursor={cursor}"))
        .await
        .assert_problem(400, &[("cursor", "invalid")]);
    let empty = api.get("/depots/south/vehicles").await;
    assert_eq!(empty.status, 200, "{empty:?}");
    assert_eq!(empty.body, json!({"items": [], "nextCursor": null}));
    api.get("/depots/%20%20/vehicles")
        .await
        .assert_problem(400, &[("depot", "required")]);
    // A depot is free text: one holding `#` is found by its name, and makes no `#` in its key.
    let yard = api
        .post(
            "/vehicles",
            json!({"plate": "D-5", "chassis": "CD-5", "depot": "Yard #2"}),
        )
        .await;
    assert_eq!(yard.status, 201, "{yard:?}");
    assert_eq!(yard.body["depot"], "Yard #2", "stored as sent");
    let listed = api.get("/depots/yard%20%232/vehicles").await;
    assert_eq!(listed.body["items"][0]["vehicleId"], yard.body["vehicleId"]);
    let id = yard.body["vehicleId"].as_str().unwrap();
    let stored = api
        .item(&format!("VEHICLE#{id}"), &format!("VEHICLE#{id}"))
        .await
        .unwrap();
    assert_eq!(crate::harness::s(&stored, "GSI5PK"), "DEPOT#yard %232");
}

/// `KA19XTR`, `KA 19 XTR`, `KA-19-XTR` and `K A 1 9 X T R` are one plate: one lock
/// `PLATE#ka19xtr`, found by any spelling; the vehicle keeps the spelling it was registered
/// with. A letter from another script or an accented one is `400`.
async fn separators_are_formatting_and_other_scripts_are_refused(api: Api) {
    let first = register(&api, "KA19XTR", "C-1").await;
    assert_eq!(first.status, 201, "{first:?}");
    for (i, spelling) in ["KA 19 XTR", "KA-19-XTR", "K A 1 9 X T R", "ka-19 xtr"]
        .into_iter()
        .enumerate()
    {
        register(&api, spelling, &format!("C-{}", i + 2))
            .await
            .assert_problem(409, &[("plate", "taken")]);
        let found = api
            .get(format!("/plates/{}", spelling.replace(' ', "%20")))
            .await;
        assert_eq!(found.status, 200, "{spelling}: {found:?}");
        assert_eq!(found.body["vehicleId"], first.body["vehicleId"]);
    }
    // Chassis numbers too.
    register(&api, "OTHER-1", "c 1")
        .await
        .assert_problem(409, &[("chassis", "taken")]);
    assert_eq!(api.items_with_pk_prefix("VEHICLE#").await.len(), 1);
    assert!(api.item("PLATE#ka19xtr", "PLATE#ka19xtr").await.is_some());
    let spelled = register(&api, "KA-20-XTR", "C-20").await;
    assert_eq!(
        spelled.body["plate"], "ka-20-xtr",
        "the vehicle keeps its spelling"
    );
    assert!(api.item("PLATE#ka20xtr", "PLATE#ka20xtr").await.is_some());
    // A plate change to another spelling of a taken plate is 409 too.
    let moved = api
        .put(
            format!(
                "/vehicles/{}/plate",
                spelled.body["vehicleId"].as_str().unwrap()
            ),
            json!({"plate": "ka 19-xtr"}),
        )
        .await;
    moved.assert_problem(409, &[("plate", "taken")]);
    for look_alike in ["\u{041A}A19XTR", "K\u{00C4}19XTR", "KA19X\u{0422}R"] {
        register(&api, look_alike, "C-99")
            .await
            .assert_problem(400, &[("plate", "invalid")]);
    }
}

async fn register_returns_the_normalised_vehicle_and_writes_three_items(api: Api) {
    let reply = api
        .post("/vehicles", json!({"plate": " KA19  xtr", "chassis": "ＷＶＷ ZZZ 1JZ", "depot": "north", "colour": "red"}))
        .await;
    assert_eq!(reply.status, 201, "{reply:?}");
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let id = reply.body["vehicleId"].as_str().unwrap().to_owned();
    assert_eq!(
        reply.header("location"),
        Some(format!("/vehicles/{id}").as_str())
    );
    assert_eq!(reply.body["plate"], "ka19 xtr");
    assert_eq!(reply.body["chassis"], "wvw zzz 1jz");
    assert_eq!(reply.body["depot"], "north");
    assert!(reply.body["addedAt"].as_i64().unwrap() > 1_700_000_000_000);
    assert!(
        reply.body.get("colour").is_none(),
        "unknown fields are ignored"
    );

    let vehicle = api
        .item(&format!("VEHICLE#{id}"), &format!("VEHICLE#{id}"))
        .await
        .unwrap();
    assert_eq!(s(&vehicle, "plate"), "ka19 xtr");
    let plate = api.item("PLATE#ka19xtr", "PLATE#ka19xtr").await.unwrap();
    assert_eq!(s(&plate, "vehicleId"), id);
    let chassis = api
        .item("CHASSIS#wvwzzz1jz", "CHASSIS#wvwzzz1jz")
        .await
        .unwrap();
    assert_eq!(s(&chassis, "vehicleId"), id);
    assert_eq!(api.items().await.len(), 3);

    let read = api.get(format!("/vehicles/{id}")).await;
    assert_eq!(read.status, 200);
    assert_eq!(read.body, reply.body);
}

async fn register_names_every_bad_field(api: Api) {
    api.post("/vehicles", json!({})).await.assert_problem(
        400,
        &[
            ("chassis", "required"),
            ("depot", "required"),
            ("plate", "required"),
        ],
    );
    api.post(
        "/vehicles",
        json!({"plate": "   ", "chassis": "x".repeat(33), "depot": 7}),
    )
    .await
    .assert_problem(
        400,
        &[
            ("chassis", "too_long"),
            ("depot", "invalid"),
            ("plate", "required"),
        ],
    );
    api.post(
        "/vehicles",
        json!({"plate": "KA#19", "chassis": "C1", "depot": "n"}),
    )
    .await
    .assert_problem(400, &[("plate", "invalid")]);
    assert!(
        api.items().await.is_empty(),
        "nothing is written for a bad request"
    );
}

async fn register_names_every_taken_value(api: Api) {
    assert_eq!(register(&api, "KA19 XTR", "C-1").await.status, 201);
    register(&api, "ka19 xtr", "C-2")
        .await
        .assert_problem(409, &[("plate", "taken")]);
    register(&api, "P-2", "c-1")
        .await
        .assert_problem(409, &[("chassis", "taken")]);
    let both = register(&api, "ＫＡ１９ ＸＴＲ", " C-1 ").await;
    both.assert_problem(409, &[("chassis", "taken"), ("plate", "taken")]);
    assert_eq!(both.body["type"], "/problems/conflict");
    assert_eq!(
        api.items().await.len(),
        3,
        "a refused registration writes nothing"
    );
}

async fn lookups_by_any_spelling(api: Api) {
    let id = register(&api, "KA19 XTR", "WVW-1").await.body["vehicleId"].clone();
    let plate = api.get("/plates/%EF%BC%AB%EF%BC%A119%20%20xtr").await;
    assert_eq!(plate.status, 200, "{plate:?}");
    assert_eq!(plate.body, json!({"plate": "ka19 xtr", "vehicleId": id}));
    let chassis = api.get("/chassis/wvw-1").await;
    assert_eq!(chassis.body, json!({"chassis": "wvw-1", "vehicleId": id}));
}

async fn reads_of_missing_things_are_404(api: Api) {
    api.get("/vehicles/nope").await.assert_problem(404, &[]);
    api.get("/plates/none").await.assert_problem(404, &[]);
    api.get("/chassis/none").await.assert_problem(404, &[]);
    api.delete("/vehicles/nope").await.assert_problem(404, &[]);
    api.put("/vehicles/nope/plate", json!({"plate": "p"}))
        .await
        .assert_problem(404, &[]);
    api.get("/vehicles/bad%23id")
        .await
        .assert_problem(400, &[("vehicleId", "invalid")]);
    api.get(format!("/vehicles/{}", "a".repeat(65)))
        .await
        .assert_problem(400, &[("vehicleId", "too_long")]);
    api.get("/plates/%23")
        .await
        .assert_problem(400, &[("plate", "invalid")]);
}

async fn change_plate_frees_the_old_plate_at_once(api: Api) {
    let first = register(&api, "OLD-1", "C-1").await.body;
    let id = first["vehicleId"].as_str().unwrap();
    let changed = api
        .put(format!("/vehicles/{id}/plate"), json!({"plate": " NEW-1 "}))
        .await;
    assert_eq!(changed.status, 200, "{changed:?}");
    assert_eq!(changed.body["plate"], "new-1");
    assert_eq!(changed.body["chassis"], first["chassis"]);
    assert_eq!(api.get(format!("/vehicles/{id}")).await.body, changed.body);
    assert_eq!(api.get("/plates/new-1").await.body["vehicleId"], id);
    assert_eq!(api.get("/plates/old-1").await.status, 404);
    assert!(api.item("PLATE#old1", "PLATE#old1").await.is_none());
    // The old plate is reclaimable at once.
    assert_eq!(register(&api, "old-1", "C-2").await.status, 201);
    // The same plate again is a no-op.
    assert_eq!(
        api.put(format!("/vehicles/{id}/plate"), json!({"plate": "NEW-1"}))
            .await
            .status,
        200
    );
    api.put(format!("/vehicles/{id}/plate"), json!({}))
        .await
        .assert_problem(400, &[("plate", "required")]);
    assert_eq!(api.items_with_pk_prefix("PLATE#").await.len(), 2);
}

async fn change_plate_to_a_taken_plate_is_409(api: Api) {
    let a = register(&api, "A-1", "C-1").await.body;
    register(&api, "B-1", "C-2").await;
    let id = a["vehicleId"].as_str().unwrap();
    api.put(format!("/vehicles/{id}/plate"), json!({"plate": "b-1"}))
        .await
        .assert_problem(409, &[("plate", "taken")]);
    assert_eq!(
        api.get(format!("/vehicles/{id}")).await.body,
        a,
        "nothing changed"
    );
    assert_eq!(
        s(
            &api.item("PLATE#a1", "PLATE#a1").await.unwrap(),
            "vehicleId"
        ),
        id
    );
}

async fn retire_removes_the_vehicle_and_both_locks(api: Api) {
    let id = register(&api, "R-1", "C-1").await.body["vehicleId"]
        .as_str()
        .unwrap()
        .to_owned();
    register(&api, "KEEP", "C-KEEP").await;
    let reply = api.delete(format!("/vehicles/{id}")).await;
    assert_eq!(reply.status, 204);
    assert_eq!(reply.body, serde_json::Value::Null);
    assert!(
        api.item(&format!("VEHICLE#{id}"), &format!("VEHICLE#{id}"))
            .await
            .is_none()
    );
    assert!(api.item("PLATE#r1", "PLATE#r1").await.is_none());
    assert!(api.item("CHASSIS#c1", "CHASSIS#c1").await.is_none());
    assert_eq!(api.items().await.len(), 3, "the other vehicle is untouched");
    // Its registration's outbox item (its plate and chassis) goes; the retirement's stays.
    let left = api.outbox_of("vehicle", &id).await;
    assert_eq!(left.len(), 1, "{left:?}");
    let text = format!("{left:?}");
    assert!(
        text.contains("VehicleRetired") && !text.contains("r-1"),
        "{text}"
    );
    assert_eq!(api.get(format!("/vehicles/{id}")).await.status, 404);
    api.delete(format!("/vehicles/{id}"))
        .await
        .assert_problem(404, &[]);
    assert_eq!(
        register(&api, "R-1", "C-1").await.status,
        201,
        "both values are reclaimable at once"
    );
}

/// 64 concurrent registrations of one plate, spelled eight ways, each with its own chassis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_plate_raced_by_64_registrations_has_one_holder() {
    let api = Api::start(Mode::Http).await;
    let spellings = [
        "KA19 XTR",
        "ka19 xtr",
        " KA19  xtr",
        "ＫＡ１９ ＸＴＲ",
        "Ka19\tXtr",
        "kA19 XTR ",
        "KA19\u{3000}XTR",
        "ka19  XTR",
    ];
    let replies = futures::future::join_all((0..64).map(|i| {
        let api = api.clone();
        let plate = spellings[i % spellings.len()];
        async move { register(&api, plate, &format!("chassis-{i}")).await }
    }))
    .await;
    let created: Vec<&Reply> = replies.iter().filter(|r| r.status == 201).collect();
    assert_eq!(created.len(), 1, "{replies:?}");
    for reply in replies.iter().filter(|r| r.status != 201) {
        reply.assert_problem(409, &[("plate", "taken")]);
    }
    let winner = created[0].body["vehicleId"].as_str().unwrap();
    let items = api.items().await;
    let plates: Vec<_> = items
        .iter()
        .filter(|i| s(i, "PK").starts_with("PLATE#"))
        .collect();
    assert_eq!(plates.len(), 1);
    assert_eq!(s(plates[0], "vehicleId"), winner);
    let vehicles: Vec<_> = items
        .iter()
        .filter(|i| s(i, "PK").starts_with("VEHICLE#"))
        .collect();
    assert_eq!(vehicles.len(), 1);
    let chassis: Vec<_> = items
        .iter()
        .filter(|i| s(i, "PK").starts_with("CHASSIS#"))
        .collect();
    assert_eq!(chassis.len(), 1, "no lock without its vehicle");
    for lock in plates.iter().chain(&chassis) {
        let id = s(lock, "vehicleId");
        assert!(
            api.item(&format!("VEHICLE#{id}"), &format!("VEHICLE#{id}"))
                .await
                .is_some()
        );
    }
}

/// Sixteen vehicles change to one plate at once: one gets it, the others keep theirs, and every
/// lock still names the vehicle that has its plate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_plate_raced_by_16_changes_has_one_holder() {
    let api = Api::start(Mode::Http).await;
    let mut ids = Vec::new();
    for i in 0..16 {
        let reply = register(&api, &format!("OLD-{i}"), &format!("C-{i}")).await;
        ids.push(reply.body["vehicleId"].as_str().unwrap().to_owned());
    }
    let replies = futures::future::join_all(ids.iter().map(|id| {
        let api = api.clone();
        let path = format!("/vehicles/{id}/plate");
        async move { api.put(path, json!({"plate": " Wanted-1 "})).await }
    }))
    .await;
    let winners: Vec<&Reply> = replies.iter().filter(|r| r.status == 200).collect();
    assert_eq!(winners.len(), 1, "{replies:?}");
    for reply in replies.iter().filter(|r| r.status != 200) {
        reply.assert_problem(409, &[("plate", "taken")]);
    }
    let winner = winners[0].body["vehicleId"].as_str().unwrap();
    let items = api.items().await;
    let plates: Vec<_> = items
        .iter()
        .filter(|i| s(i, "PK").starts_with("PLATE#"))
        .collect();
    assert_eq!(plates.len(), 16, "one lock per vehicle, none left behind");
    for lock in plates {
        let id = s(lock, "vehicleId");
        let vehicle = api
            .item(&format!("VEHICLE#{id}"), &format!("VEHICLE#{id}"))
            .await
            .unwrap();
        assert_eq!(
            format!("PLATE#{}", s(&vehicle, "plate").replace(['-', ' '], "")),
            s(lock, "PK"),
            "the lock names its holder"
        );
    }
    assert_eq!(
        s(
            &api.item("PLATE#wanted1", "PLATE#wanted1").await.unwrap(),
            "vehicleId"
        ),
        winner
    );
}

/// Six changes of one vehicle's plate at once, each to a plate of its own, over real concurrent
/// requests. Each change reads the vehicle and commits only if its plate is still the one read;
/// one that keeps losing to the others gives up after `RACE_ATTEMPTS` reads with `503` and
/// `retry-after` (docs/API.md: the route's only `409` is a plate taken, which these are not, and
/// it takes no `if-match`, so no `412`; a retry succeeds). Whatever the split, the table holds one
/// plate lock, naming the vehicle, for the plate the vehicle has, which is a winner's; no lock is
/// left for a plate the vehicle does not hold; and one change event is recorded per `200`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_vehicle_raced_by_6_plate_changes_keeps_one_lock_for_its_plate() {
    let api = Api::start(Mode::Http).await;
    let id = register(&api, "OLD-1", "C-1").await.body["vehicleId"]
        .as_str()
        .unwrap()
        .to_owned();
    let replies = futures::future::join_all((0..6).map(|i| {
        let api = api.clone();
        let path = format!("/vehicles/{id}/plate");
        async move { api.put(path, json!({"plate": format!("NEW-{i}")})).await }
    }))
    .await;
    let mut winners = Vec::new();
    for reply in &replies {
        match reply.status {
            200 => winners.push(reply.body["plate"].as_str().unwrap().to_owned()),
            _ => {
                reply.assert_problem(503, &[]);
                assert!(reply.header("retry-after").is_some(), "{reply:?}");
            }
        }
    }
    assert!(!winners.is_empty(), "{replies:?}");

    let vehicle = api
        .item(&format!("VEHICLE#{id}"), &format!("VEHICLE#{id}"))
        .await
        .unwrap();
    let plate = s(&vehicle, "plate").to_owned();
    assert!(
        winners.contains(&plate),
        "{plate} is a winner's: {winners:?}"
    );
    let locks = api.items_with_pk_prefix("PLATE#").await;
    assert_eq!(locks.len(), 1, "one plate lock, no orphan: {locks:?}");
    assert_eq!(s(&locks[0], "vehicleId"), id, "the lock names the vehicle");
    assert_eq!(
        s(&locks[0], "PK"),
        format!("PLATE#{}", plate.replace('-', "")),
        "the lock is the vehicle's plate's"
    );
    assert_eq!(
        api.get(format!("/vehicles/{id}")).await.body["plate"],
        plate
    );
    assert_eq!(
        api.get(format!("/plates/{plate}")).await.body["vehicleId"],
        id
    );
    let changes = api
        .outbox_of("vehicle", &id)
        .await
        .iter()
        .filter(|item| format!("{item:?}").contains("VehiclePlateChanged"))
        .count();
    assert_eq!(
        changes,
        winners.len(),
        "one change event per 200, none per 503"
    );
    // A change that was refused succeeds when sent again.
    let again = api
        .put(format!("/vehicles/{id}/plate"), json!({"plate": "NEW-9"}))
        .await;
    assert_eq!(again.status, 200, "{again:?}");
    assert_eq!(api.items_with_pk_prefix("PLATE#").await.len(), 1);
}

/// `KA19XTR` re-spelled `KA 19 XTR`: both spellings meet the lock the vehicle holds, so the lock
/// stays and takes the new spelling with the vehicle (a claim of it and a release of it in one
/// transaction would be two actions on one item, which DynamoDB refuses).
async fn change_plate_to_another_spelling_of_its_own_plate_keeps_its_lock(api: Api) {
    let registered = register(&api, "KA19XTR", "C-1").await;
    let id = registered.body["vehicleId"].as_str().unwrap().to_owned();
    let respelled = api
        .put(
            format!("/vehicles/{id}/plate"),
            json!({"plate": "KA 19 XTR"}),
        )
        .await;
    assert_eq!(respelled.status, 200, "{respelled:?}");
    assert_eq!(respelled.body["plate"], "ka 19 xtr");
    let lock = api.item("PLATE#ka19xtr", "PLATE#ka19xtr").await.unwrap();
    assert_eq!(
        (s(&lock, "plate"), s(&lock, "vehicleId")),
        ("ka 19 xtr", id.as_str())
    );
    assert_eq!(api.items().await.len(), 3, "the vehicle and its two locks");
    let found = api.get("/plates/KA-19-XTR").await;
    assert_eq!(found.body, json!({"plate": "ka 19 xtr", "vehicleId": id}));
    register(&api, "ka-19-xtr", "C-2")
        .await
        .assert_problem(409, &[("plate", "taken")]);
    let checked = singlet_tools::fsck::fsck(&api.ctx, singlet_tools::fsck::Options::default())
        .await
        .unwrap();
    assert!(checked.findings.is_empty(), "{:?}", checked.findings);
}
