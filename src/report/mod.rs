//! Turning records into what people read: tables in the source documents'
//! shape with the historical figures beside them, and the progress display.

pub mod figures;
pub mod historical;
pub mod html;
pub mod progress;
pub mod tables;
