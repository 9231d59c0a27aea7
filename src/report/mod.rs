//! Turning records into what people read: tables in the source documents'
//! shape with the historical figures beside them, figures, and the report page.

pub mod caveats;
pub mod checks;
pub mod doctor;
pub mod figures;
pub mod historical;
pub mod html;
pub mod htmltext;
pub mod profile;
pub mod table;
pub mod testbed;
