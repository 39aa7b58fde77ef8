package mirror

// InventoryFrom lets tests take a target's inventory however few versions
// they copy.
var InventoryFrom = &inventoryFrom
