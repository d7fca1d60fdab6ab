/*!
OS/user cache interference (Nellans et al.): the run-length predictor and OS off-load.
(Temporary module file of the `offload` branch; the item-1 commit brings the real one.)
*/
pub mod offload;
pub mod predictor;
